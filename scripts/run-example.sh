#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: installs dependencies, builds only what the job needs — the kf
# binary and the task-side Python package with its timing module (the `default` preset into build/; tests,
# benchmarks and the Python API are built by scripts/build.sh or scripts/test.sh) — and evaluates the example
# candidate `examples/candidates/bias_relu/fast.cpp` on the task `examples/tasks/bias_relu` — build,
# correctness, performance against the torch reference, score — storing a job and a kernel row in
# runs/kernels.sqlite3. Extra arguments are passed to `kf run` (e.g. --candidate
# other.cpp --json out.json).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default --target kf kf_python_package _measure
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--candidate examples/candidates/bias_relu/fast.cpp)
exec build/kf run examples/tasks/bias_relu "${args[@]}"
