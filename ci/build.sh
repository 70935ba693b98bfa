#!/usr/bin/env bash
# Configures and builds one CMake preset (default: release). Usage: ci/build.sh [PRESET]
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-release}
cmake --preset "$preset" -DFANSTORE_BUILD_TESTS=ON >/dev/null
cmake --build --preset "$preset" -j"$(nproc)"
