#!/usr/bin/env bash
# Installs every Debian 12 package KernelFoundry needs to build, test and run (idempotent: only missing
# packages are fetched). Needs root (or sudo). Python packages come from Debian too (PyPI is not used).
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git clang-14 libclang-rt-14-dev
  libyaml-cpp-dev nlohmann-json3-dev libsimdjson-dev libarchive-dev libsqlite3-dev sqlite3 libssl-dev
  libcli11-dev libfmt-dev libgtest-dev libgmock-dev
  pybind11-dev python3-pybind11 python3-dev python3-pytest python3-pytest-xdist python3-numpy python3-torch libtorch-dev
  pocl-opencl-icd ocl-icd-opencl-dev opencl-headers clinfo zip unzip xz-utils bzip2 procps iproute2 strace
  rabbitmq-server librabbitmq-dev python3-celery python3-msgpack
  libpq-dev postgresql python3-psycopg2 python3-sqlalchemy
  libcpp-httplib-dev chromium python3-yaml ccache linux-perf libjemalloc2
)

# The browser test of kf serve (tests/serve/e2e) runs Playwright from npm: node and npm from Debian unless a
# node with npm is installed already (e.g. NodeSource's nodejs, which bundles npm and conflicts with Debian's).
command -v npm >/dev/null 2>&1 || PACKAGES+=(nodejs npm)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all ${#PACKAGES[@]} packages present"
fi

# The unprivileged user kf runs build and test children as when it runs as root (issue 25; KF_SANDBOX_USER
# overrides, `nobody` is the fallback): a system user without a home or a login shell, in the GPU device groups
# (video, render) that exist here, so candidates can open /dev/dri and /dev/nvidia* nodes owned by them.
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
if ! getent passwd kf-sandbox >/dev/null; then
  echo "install-deps: creating the system user kf-sandbox"
  $SUDO useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin --user-group kf-sandbox
fi
for group in video render; do
  if getent group "$group" >/dev/null && ! id -nG kf-sandbox | tr ' ' '\n' | grep -qx "$group"; then
    $SUDO usermod -a -G "$group" kf-sandbox
  fi
done
