#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: installs dependencies, builds kf (scripts/build.sh: the `default`
# preset into build/), and evaluates the example candidate `examples/candidates/bias_relu/fast.cpp` on the task
# `examples/tasks/bias_relu` — build, correctness, performance against the torch reference, score — storing a
# job and a kernel row in runs/kernels.sqlite3. Extra arguments are passed to `kf run` (e.g. --candidate
# other.cpp --json out.json).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--candidate examples/candidates/bias_relu/fast.cpp)
exec build/kf run examples/tasks/bias_relu "${args[@]}"
