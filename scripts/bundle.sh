#!/bin/sh
# Relocatable bundle of kf for a machine where nothing can be installed (the lent GPU machine; issue 27):
#   dist/kf-<version>-linux-x86_64.tar.gz, unpacking to kf-<version>-linux-x86_64/ with
#     bin/kf                          debug info stripped (so are the Python modules); DT_RPATH $ORIGIN/../lib (CMakeLists.txt), so it loads lib/ first
#     lib/                            every shared library kf needs beyond glibc's own (libstdc++ and libgcc_s
#                                     included), each under its soname, stripped; lib/COPYRIGHTS/ their Debian
#                                     copyright files
#     share/kernelfoundry/...         what `cmake --install` writes (Python package both sides, SDK, examples);
#                                     the SDK's include/ also carries nlohmann/json (header-only), which native
#                                     test programs include and another distribution may lack
#     share/kernelfoundry/python-src  the sources of kernelfoundry._measure: `kf setup-python [--python PATH]`
#                                     builds it for that machine's interpreter (pybind11 + a C++20 compiler)
# Needs a configured and built build directory (kf, _measure). glibc itself is not bundled: the target's glibc
# must be at least the build machine's (Debian 12: 2.36).
# Usage: scripts/bundle.sh [BUILD_DIR] [DIST_DIR]     (defaults: build, dist; prints the tarball's path)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
dist=${2:-$root/dist}
cmake=${CMAKE:-cmake}
fail() { echo "bundle: $*" >&2; exit 1; }
[ -x "$build/kf" ] || fail "no $build/kf: build the kf and _measure targets first"
version=$("$build/kf" --version | awk '{print $NF}')
name=kf-$version-linux-x86_64
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kf-bundle.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
stage=$tmp/$name

"$cmake" --install "$build" --prefix "$stage" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log" >&2; fail "cmake --install"; }
ls "$stage/share/kernelfoundry/python-task/kernelfoundry/" | grep -q '^_measure.*\.so$' || fail "the install lacks _measure"
readelf -d "$stage/bin/kf" | grep -q 'RPATH.*\$ORIGIN/\.\./lib' || fail "bin/kf has no RPATH \$ORIGIN/../lib"
strip --strip-debug "$stage/bin/kf"
find "$stage/share" -name '*.so' -exec chmod u+w {} + -exec strip --strip-debug {} +  # the Python modules

# glibc's libraries stay the target's (they must match its dynamic loader); everything else is copied.
is_glibc() {
  case "$1" in
    linux-vdso.so.*|ld-linux*|libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|libresolv.so.*|\
    libutil.so.*|libanl.so.*|libnsl.so.*|libBrokenLocale.so.*|libmvec.so.*) return 0;;
  esac
  return 1
}
mkdir -p "$stage/lib/COPYRIGHTS"
LD_LIBRARY_PATH='' ldd "$stage/bin/kf" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' >"$tmp/libs"
while read -r soname path; do
  is_glibc "$soname" && continue
  cp -L "$path" "$stage/lib/$soname"
  chmod u+w "$stage/lib/$soname"
  strip --strip-unneeded "$stage/lib/$soname"
  pkg=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | head -1 | cut -d: -f1) || pkg=
  if [ -n "$pkg" ] && [ -f "/usr/share/doc/$pkg/copyright" ]; then cp "/usr/share/doc/$pkg/copyright" "$stage/lib/COPYRIGHTS/$pkg"; fi
done <"$tmp/libs"

# nlohmann/json for native test programs (the SDK headers include it), from where the compiler finds it here.
json=$(printf '#include <nlohmann/json.hpp>\n' | c++ -std=c++20 -x c++ -M - 2>/dev/null | tr ' \\' '\n\n' |
       grep '/nlohmann/json.hpp$' | head -1)
[ -n "$json" ] || fail "nlohmann/json.hpp not found (Debian: nlohmann-json3-dev)"
cp -r "$(dirname "$json")" "$stage/share/kernelfoundry/sdk/include/"
[ -f /usr/share/doc/nlohmann-json3-dev/copyright ] && cp /usr/share/doc/nlohmann-json3-dev/copyright "$stage/lib/COPYRIGHTS/nlohmann-json3-dev"

# The bundle's own check: nothing outside it but glibc.
LD_LIBRARY_PATH='' ldd "$stage/bin/kf" | awk '$2 == "=>" {print $1, $3}' | while read -r soname path; do
  case "$(readlink -f "$path")" in "$(readlink -f "$stage")"/lib/*) continue;; esac
  is_glibc "$soname" || fail "bin/kf loads $soname from $path, outside the bundle"
done

mkdir -p "$dist"
tar -C "$tmp" -czf "$dist/$name.tar.gz.part" "$name"
mv "$dist/$name.tar.gz.part" "$dist/$name.tar.gz"
echo "$dist/$name.tar.gz"
