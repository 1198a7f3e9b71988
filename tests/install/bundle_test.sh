#!/bin/sh
# Bundle test (ctest BundleE2E, label install): scripts/bundle.sh makes the relocatable tarball, which is unpacked
# elsewhere and run with LD_LIBRARY_PATH empty and, where a mount namespace can be made (root, unshare), the
# source and build trees hidden under empty tmpfs mounts:
#  1. `ldd bin/kf` resolves every library inside the bundle but glibc's (libc, libm, libpthread, libdl, librt,
#     libresolv, ld-linux, linux-vdso);
#  2. kf run of the native example omp_reduction with its fast candidate from another directory: correct (or
#     noisy), built with the bundle's SDK;
#  3. kf validate of the pytest example bias_relu (test collection with the bundle's Python package);
#  4. the bundle carries the sources of kernelfoundry._measure for `kf setup-python` and nlohmann/json in the SDK.
# The README example itself (bias_relu with a torch extension build, minutes) runs in
# `scripts/device-check.sh --dry-run`, as does `kf setup-python` (a compile of about a minute).
# Usage: bundle_test.sh SOURCE_DIR BUILD_DIR
set -eu
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kf-bundle-test.XXXXXX")
chmod 755 "$tmp"  # the sandbox user reads the unpacked bundle (mktemp: 0700)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "bundle test: FAILED: $*" >&2; exit 1; }
show() { echo "---- $1"; cat "$1"; echo "----"; }

tarball=$("$src/scripts/bundle.sh" "$build" "$tmp/dist" 2>"$tmp/bundle.log") || { show "$tmp/bundle.log"; fail "scripts/bundle.sh"; }
case "$tarball" in */kf-*-linux-x86_64.tar.gz) ;; *) fail "unexpected tarball name '$tarball'";; esac
mkdir "$tmp/unpacked" "$tmp/elsewhere"
tar -C "$tmp/unpacked" -xzf "$tarball"
b=$(echo "$tmp"/unpacked/kf-*-linux-x86_64)
share=$b/share/kernelfoundry
echo "bundle $(basename "$tarball"): $(du -k "$tarball" | cut -f1) KiB"

# The checks, run in a mount namespace that hides the trees when possible (argument 1: whether they are hidden).
cat >"$tmp/checks.sh" <<'EOF'
set -eu
b=$1; share=$2; tmp=$3; hidden=$4; src=$5; build=$6
fail() { echo "bundle test: FAILED: $*" >&2; exit 1; }
show() { echo "---- $1"; cat "$1"; echo "----"; }
if [ "$hidden" = yes ]; then
  [ ! -e "$build/kf" ] && [ ! -e "$src/CMakeLists.txt" ] || fail "the trees are still visible"
  echo "source and build trees hidden"
fi
cd "$tmp/elsewhere"
export LD_LIBRARY_PATH=
unset KF_PYTHON_DIR KF_PYTHON_HOST_DIR KF_SDK_DIR KF_PYTHON 2>/dev/null || true
# A cache of its own: a build cached by another kf (the build tree's, scripts/test.sh's persistent cache) has the
# same key (same SDK content) and would not show which SDK this kf hands to builds.
export KF_CACHE_DIR="$tmp/cache"
# 1. Nothing outside the bundle but glibc.
ldd "$b/bin/kf" >"$tmp/ldd.txt"
outside=$(awk '$2 == "=>" {print $1, $3} $2 != "=>" {print $1, $1}' "$tmp/ldd.txt" | while read -r so path; do
  case "$(readlink -f "$path" 2>/dev/null || echo "$path")" in "$(readlink -f "$b")"/lib/*) continue;; esac
  case "$so" in linux-vdso.so.*|*ld-linux*|libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|libresolv.so.*) continue;; esac
  echo "$so"
done)
[ -z "$outside" ] || { show "$tmp/ldd.txt"; fail "bin/kf loads from outside the bundle: $outside"; }
grep -q "not found" "$tmp/ldd.txt" && { show "$tmp/ldd.txt"; fail "a library is not found"; }
echo "ldd bin/kf: $(grep -c "$b/" "$tmp/ldd.txt") libraries from the bundle, the rest glibc's"
"$b/bin/kf" --version
# 2. The native example end to end.
rc=0
"$b/bin/kf" run "$share/examples/tasks/omp_reduction" --candidate "$share/examples/candidates/omp_reduction/fast.cpp" \
   --no-store --no-verdict-cache --json "$tmp/run.json" >"$tmp/run.log" 2>&1 || rc=$?
[ "$rc" -eq 0 ] || { show "$tmp/run.log"; fail "kf run omp_reduction fast.cpp exited $rc (expected 0: correct)"; }
grep -q "$share/sdk/include" "$tmp/run.json" || fail "the build did not use the bundle's SDK"
echo "kf run omp_reduction fast.cpp: exit 0"
# 3. Test collection with the bundle's Python package.
"$b/bin/kf" validate "$share/examples/tasks/bias_relu" >"$tmp/validate.log" 2>&1 || { show "$tmp/validate.log"; fail "kf validate bias_relu"; }
echo "kf validate bias_relu: ok"
EOF
hidden=no
if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
  hidden=yes
  unshare -m sh -c 'mount -t tmpfs kf-hidden "$1" && { [ "$2" = "${2#$1/}" ] && mount -t tmpfs kf-hidden "$2" || true; } &&
                    exec sh "$3/checks.sh" "$4" "$5" "$3" yes "$1" "$2"' sh "$src" "$build" "$tmp" "$b" "$share"
else
  echo "note: no mount namespace here (not root or no unshare): the trees stay visible; the bundle's kf looks only in itself"
  sh "$tmp/checks.sh" "$b" "$share" "$tmp" no "$src" "$build"
fi

# 4. What kf setup-python and native builds on another machine need.
for f in python-src/measure_module.cc python-src/measure_paired.cc python-src/core/convert.cc \
         python-src/core/convert.hpp sdk/include/nlohmann/json.hpp sdk/include/kernelfoundry/sdk/device_timing.hpp; do
  [ -f "$share/$f" ] || fail "the bundle lacks share/kernelfoundry/$f"
done
"$b/bin/kf" setup-python --help >/dev/null || fail "kf setup-python --help"
echo "bundle test: ok"
