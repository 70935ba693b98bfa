#!/usr/bin/env bash
# The decoders' fuzz targets run long (default an hour each): executions per second and
# crashes, in bench/results/fuzz.json. A crash's input is kept in build/fuzz/artifacts/.
# Usage: bench/fuzz.sh [SECONDS_PER_TARGET]
set -euo pipefail
cd "$(dirname "$0")/.."
exec ci/fuzz.sh "${1:-3600}" --json bench/results/fuzz.json
