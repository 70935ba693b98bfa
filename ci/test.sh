#!/usr/bin/env bash
# Installs the dependencies, builds, and runs every test: the dev build (all tests), then
# the ASan+UBSan build (every test except the > 4 GiB round trip, which is slow there and
# exercises nothing ASan would catch that the smaller streamed members do not), then the
# TSan build (the same; the interception core and preload libraries are never
# instrumented, see intercept/CMakeLists.txt); then the decoders' fuzz targets, 20 s each
# (ci/fuzz.sh; bench/fuzz.sh runs them for an hour).
# Usage: ci/test.sh            (as root on a fresh Debian 12 machine)
set -euo pipefail
cd "$(dirname "$0")/.."
ci/install-deps.sh
status=0
echo "== dev build: all tests"
ci/build.sh dev
ctest --preset dev -j"$(nproc)" || status=1
echo "== asan build (AddressSanitizer + UBSan)"
ci/build.sh asan
ASAN_OPTIONS=detect_leaks=1 ctest --preset asan -j"$(nproc)" -E 'fanstore_large_member' || status=1
echo "== tsan build (ThreadSanitizer)"
ci/build.sh tsan
TSAN_OPTIONS=halt_on_error=1 ctest --preset tsan -j"$(nproc)" -E 'fanstore_large_member' || status=1
echo "== fuzz build (clang, libFuzzer): each decoder briefly"
ci/fuzz.sh 20 || status=1
exit $status
