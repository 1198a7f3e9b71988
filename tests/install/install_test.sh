#!/bin/sh
# Install test (ctest InstallE2E, label install): `cmake --install` into a temporary prefix, then the prefix is
# moved (nothing may depend on the path it was installed to) and the installed kf is run from another
# directory with no KF_* resource variables:
#  1. kf run of the native example omp_reduction with its fast candidate: correct (SDK headers + sources and
#     the example come from the prefix);
#  2. kf validate of the pytest example bias_relu: test collection runs the installed Python package;
#  3. the install carries both sides of the Python package (python/README.md): the task side holds no host module,
#     and the host side alone is the Python API's setup (`PYTHONPATH=<prefix>/share/kernelfoundry/python`);
#  4. with the prefix's Python package / SDK hidden, kf fails naming the prefix, not the source or build tree
#     (an installed kf never falls back to them).
# Usage: install_test.sh BUILD_DIR [CMAKE]
set -eu
build=$1
cmake=${2:-cmake}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kf-install-test.XXXXXX")
# An install prefix is world-readable (/usr/local, /opt): the sandbox user that builds and runs candidates reads
# the SDK and the task-side package from it (mktemp makes the directory 0700).
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "install test: FAILED: $*" >&2; exit 1; }
show() { echo "---- $1"; cat "$1"; echo "----"; }

"$cmake" --install "$build" --prefix "$tmp/installed" >"$tmp/install.log" 2>&1 || { show "$tmp/install.log"; fail "cmake --install"; }
mv "$tmp/installed" "$tmp/moved"
p=$tmp/moved
share=$p/share/kernelfoundry
for f in bin/kf share/kernelfoundry/python-task/kernelfoundry/__init__.py \
         share/kernelfoundry/python-task/kernelfoundry/warm_client.py share/kernelfoundry/python/kernelfoundry/__init__.py \
         share/kernelfoundry/python/kernelfoundry/zygote.py share/kernelfoundry/python/kernelfoundry/pch_build.py \
         share/kernelfoundry/sdk/include/kernelfoundry/sdk/task_sdk.hpp \
         share/kernelfoundry/sdk/include/kernelfoundry/measure.hpp share/kernelfoundry/sdk/src/measure/measure.cc \
         share/kernelfoundry/sdk/src/sdk/task_sdk.cc share/kernelfoundry/sdk/lib/kf_task_sdk.o \
         share/kernelfoundry/examples/tasks/omp_reduction/config.yaml share/kernelfoundry/examples/tasks/bias_relu/task.py; do
  [ -e "$p/$f" ] || fail "the install lacks $f"
done
echo "installed and moved to $p"

mkdir "$tmp/elsewhere"
cd "$tmp/elsewhere"
# A cache of its own: a build cached by an earlier run (same sources, another prefix) would not show the SDK path.
kf() { env -u KF_PYTHON_DIR -u KF_SDK_DIR -u KF_PYTHON KF_CACHE_DIR="$tmp/cache" "$p/bin/kf" "$@"; }

# 1. The native example end to end.
rc=0
kf run "$share/examples/tasks/omp_reduction" --candidate "$share/examples/candidates/omp_reduction/fast.cpp" \
   --no-store --no-verdict-cache --json "$tmp/elsewhere/run.json" >"$tmp/run.log" 2>&1 || rc=$?
[ "$rc" -eq 0 ] || { show "$tmp/run.log"; fail "kf run omp_reduction fast.cpp exited $rc (expected 0: correct)"; }
status=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["status"])' "$tmp/elsewhere/run.json")
# "noisy" is correct and timed, with a speedup interval wider than the target (a loaded test machine).
case "$status" in correct|noisy) ;; *) show "$tmp/run.log"; fail "status $status, expected correct (or noisy)";; esac
grep -q "$share/sdk/include" "$tmp/elsewhere/run.json" || fail "the build did not use the installed SDK ($share/sdk)"
# The SDK compiled once: the test program links the installed object instead of compiling the SDK's sources.
grep -q "$share/sdk/lib/kf_task_sdk.o" "$tmp/elsewhere/run.json" ||
  fail "the build did not link the installed SDK object ($share/sdk/lib/kf_task_sdk.o)"
echo "kf run omp_reduction fast.cpp from $tmp/elsewhere: status $status"

# 2. Test collection with the installed Python package.
kf validate "$share/examples/tasks/bias_relu" >"$tmp/validate.log" 2>&1 || { show "$tmp/validate.log"; fail "kf validate bias_relu"; }
echo "kf validate bias_relu: ok"

# 3. Both sides of the Python package: nothing of the host side in the task side; the host side alone is the
#    Python API's one setup step, and it joins the installed task side (compiled modules of both included).
for f in zygote.py pch_build.py eval_pipeline/task.py eval_pipeline/database; do
  [ ! -e "$share/python-task/kernelfoundry/$f" ] || fail "the task side holds the host-side $f"
done
ls "$share/python-task/kernelfoundry/" | grep -q '^_measure.*\.so$' || fail "the task side lacks _measure"
ls "$share/python/kernelfoundry/" | grep -q '^_contain.*\.so$' || fail "the host side lacks _contain"
env -u PYTHONPATH PYTHONPATH="$share/python" /usr/bin/python3 -c '
import sys, kernelfoundry, kernelfoundry.zygote, kernelfoundry._contain
from kernelfoundry.eval_pipeline.task import Task
from kernelfoundry.utils.performance import measure_runtime
task, _ = Task.create(sys.argv[1])
assert kernelfoundry.__file__ == sys.argv[2], kernelfoundry.__file__
' "$share/examples/tasks/omp_reduction" "$share/python-task/kernelfoundry/__init__.py" >"$tmp/api.log" 2>&1 || {
  show "$tmp/api.log"; fail "the Python API with PYTHONPATH=$share/python"; }
rc=0
env -u PYTHONPATH PYTHONPATH="$share/python-task" /usr/bin/python3 -c 'import kernelfoundry.zygote' >"$tmp/task.log" 2>&1 || rc=$?
[ "$rc" -ne 0 ] && grep -q ModuleNotFoundError "$tmp/task.log" || { show "$tmp/task.log"; fail "the task side imports the zygote"; }
echo "python-task/ (task side) and python/ (host side, the Python API alone): ok"

# 4. No fallback to the source or build tree.
mv "$share/python-task" "$share/python-task.hidden"
rc=0
kf validate "$share/examples/tasks/bias_relu" >"$tmp/nopy.log" 2>&1 || rc=$?
[ "$rc" -ne 0 ] || { show "$tmp/nopy.log"; fail "kf validate succeeded without the installed Python package"; }
grep -q "cannot find the task-side Python package" "$tmp/nopy.log" || { show "$tmp/nopy.log"; fail "no resource error"; }
grep -q "$share/python-task" "$tmp/nopy.log" || { show "$tmp/nopy.log"; fail "the error does not name $share/python-task"; }
if grep -q "source tree\|build tree" "$tmp/nopy.log"; then show "$tmp/nopy.log"; fail "an installed kf looked in the source/build tree"; fi
mv "$share/python-task.hidden" "$share/python-task"
mv "$share/sdk" "$share/sdk.hidden"
rc=0
kf run "$share/examples/tasks/omp_reduction" --candidate "$share/examples/candidates/omp_reduction/fast.cpp" \
   --no-store >"$tmp/nosdk.log" 2>&1 || rc=$?
[ "$rc" -ne 0 ] || { show "$tmp/nosdk.log"; fail "kf run succeeded without the installed SDK"; }
grep -q "cannot find the task SDK" "$tmp/nosdk.log" || { show "$tmp/nosdk.log"; fail "no SDK resource error"; }
if grep -q "source tree\|build tree" "$tmp/nosdk.log"; then show "$tmp/nosdk.log"; fail "an installed kf looked in the source/build tree"; fi
echo "without share/kernelfoundry/{python-task,sdk}: kf names the prefix and no development tree"
echo "install test: passed"
