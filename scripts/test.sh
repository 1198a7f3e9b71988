#!/usr/bin/env bash
# Runs every test of KernelFoundry on a fresh Debian 12 machine: installs dependencies, builds with -Werror,
# runs the unit + integration tests (ctest), the Python package tests (pytest), an ASan+UBSan build of the
# unit tests (end-to-end and slow cases excluded: they spawn compilers and pytest, not our code), and each
# libFuzzer target for KF_FUZZ_SECONDS (default 30). Compiled torch extensions are cached
# under build/cache so repeated runs do not recompile them.
# Usage: scripts/test.sh            (everything)
#        KF_QUICK=1 scripts/test.sh (skip sanitizer build and fuzzing)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
JOBS=${KF_JOBS:-$(nproc)}
FUZZ_SECONDS=${KF_FUZZ_SECONDS:-30}
export KF_CACHE_DIR=${KF_CACHE_DIR:-$ROOT/build/cache}
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

step "dependencies"
scripts/install-deps.sh

step "build (RelWithDebInfo, -Werror)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKF_WERROR=ON >/dev/null
ninja -C build -j "$JOBS"

step "unit and integration tests (ctest)"
set +e
(cd build && ctest --output-on-failure -j "$JOBS" --timeout 900)
record $? "ctest"

step "python package tests (pytest)"
PYTHONPATH="$ROOT/python" /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/python
record $? "pytest tests/python"
set -e

if [ -z "${KF_QUICK:-}" ]; then
  step "ASan+UBSan build of the unit tests"
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DKF_WERROR=ON -DKF_SANITIZE=ON \
        -DKF_BUILD_BENCH=OFF -DKF_BUILD_PYTHON=OFF >/dev/null
  ninja -C build-asan -j "$JOBS" kf $(cd build && ninja -t targets all | grep -o '^kf_[a-z]*_tests' | sort -u)
  set +e
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
      ctest --output-on-failure -j "$JOBS" --timeout 900 -E "Slow|Serial|E2E")
  record $? "ctest (asan+ubsan)"
  set -e

  step "libFuzzer targets (${FUZZ_SECONDS}s each)"
  CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DKF_BUILD_FUZZ=ON -DKF_BUILD_TESTS=OFF -DKF_BUILD_BENCH=OFF -DKF_BUILD_PYTHON=OFF >/dev/null
  targets=$(cd fuzz && ls *_fuzz.cc | sed 's/\.cc$//')
  ninja -C build-fuzz -j "$JOBS" $targets
  for t in $targets; do
    mkdir -p "build-fuzz/corpus-$t"
    set +e
    "build-fuzz/fuzz/$t" -max_total_time="$FUZZ_SECONDS" -rss_limit_mb=2048 -print_final_stats=0 \
        "build-fuzz/corpus-$t" > "build-fuzz/$t.log" 2>&1
    rc=$?
    set -e
    tail -n 2 "build-fuzz/$t.log"
    record $rc "fuzz $t"
  done
fi

echo
echo "suites: ${passed} passed, ${failed} failed"
[ "$failed" -eq 0 ]
