#!/usr/bin/env bash
# Runs every test of KernelFoundry on a fresh Debian 12 machine, as CMake presets (CMakePresets.json):
#   default  RelWithDebInfo, -Werror: unit + integration tests, layering, install (ctest), then pytest
#   asan     ASan+UBSan build of the unit tests (end-to-end, slow and timing tests excluded)
#   fuzz     clang-14 libFuzzer targets, KF_FUZZ_SECONDS (default 30) each
# Compiled torch extensions are cached under build/cache (KF_CACHE_DIR) so repeated runs do not recompile them.
# Usage: scripts/test.sh            (everything)
#        KF_QUICK=1 scripts/test.sh (default preset and pytest only)
# KF_JOBS sets the build/test parallelism (default: nproc).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
JOBS=${KF_JOBS:-$(nproc)}
export KF_CACHE_DIR=${KF_CACHE_DIR:-$ROOT/build/cache}
# Paired timing samples until its interval is tight or a budget (default 20 s per benchmark) runs out; the tests
# need verdicts, not precision, so they cap it machine-wide (include/kernelfoundry/paired.hpp, README).
export KF_TIMING_BUDGET_S=${KF_TIMING_BUDGET_S:-5}
# For the same reason one timed process per paired evaluation instead of kf's default 3 (tests that check the
# repetition set eval_config.timing.processes themselves).
export KF_TIMING_PROCESSES=${KF_TIMING_PROCESSES:-1}
# The shared data (fixtures/, kernelbench/): $KF_SHARED_DIR, else ../shared beside this checkout, else beside
# the repository this one was cloned from (git clone /work/main /tmp/x keeps /work/shared reachable).
find_shared() {
  if [ -n "${KF_SHARED_DIR:-}" ]; then echo "$KF_SHARED_DIR"; return 0; fi
  if [ -d "$ROOT/../shared/fixtures" ]; then (cd "$ROOT/../shared" && pwd); return 0; fi
  local origin
  origin=$(git -C "$ROOT" remote get-url origin 2>/dev/null || true)
  if [ -n "$origin" ] && [ -d "$origin/../shared/fixtures" ]; then (cd "$origin/../shared" && pwd); return 0; fi
  echo "test.sh: cannot find the shared data (a folder with fixtures/ and kernelbench/) at $ROOT/../shared" \
       "or beside the clone's origin; set KF_SHARED_DIR" >&2
  return 1
}
KF_SHARED_DIR=$(find_shared)
export KF_SHARED_DIR
echo "shared data: $KF_SHARED_DIR"
passed=0; failed=0
step() { echo; echo "==== $* ===="; }
record() { if [ "$1" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $2"; fi; }
# suite PRESET: configure, build and test one preset; a failing step counts as a failed suite.
suite() {
  local rc=0
  cmake --preset "$1" >/dev/null && cmake --build --preset "$1" -j "$JOBS" && ctest --preset "$1" -j "$JOBS" || rc=$?
  record "$rc" "ctest ($1)"
}

step "dependencies"
scripts/install-deps.sh

step "default preset: build (RelWithDebInfo, -Werror) and ctest"
suite default

step "python package tests (pytest)"
# The package as assembled in the build tree (with its compiled modules) when there is one, else the sources.
pydir=$ROOT/build/python
[ -f "$pydir/kernelfoundry/__init__.py" ] || pydir=$ROOT/python
set +e
PYTHONPATH="$pydir" /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/python
record $? "pytest tests/python"
set -e

if [ -z "${KF_QUICK:-}" ]; then
  step "asan preset: ASan+UBSan build of the unit tests"
  suite asan
  step "fuzz preset: libFuzzer targets (${KF_FUZZ_SECONDS:-30}s each)"
  suite fuzz
fi

echo
echo "suites: ${passed} passed, ${failed} failed"
[ "$failed" -eq 0 ]
