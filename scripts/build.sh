#!/usr/bin/env bash
# Configures and builds KernelFoundry into build/ (Release with debug info, warnings as errors).
# Usage: scripts/build.sh [extra cmake args]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKF_WERROR=ON "$@" >/dev/null
ninja -C build
