#!/usr/bin/env bash
# Configures and builds KernelFoundry into build/ with the `default` preset (RelWithDebInfo, -Werror; see
# CMakePresets.json). Usage: scripts/build.sh [extra cmake configure args, e.g. -DKF_BUILD_BENCH=OFF]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset default "$@" >/dev/null
cmake --build --preset default
