#!/usr/bin/env bash
# Installs the dependencies, builds, and runs every test: the dev build (all tests), then
# the ASan+UBSan build (every test except the > 4 GiB round trip, which is slow there and
# exercises nothing ASan would catch that the smaller streamed members do not, and the
# torchrun run, which the dev build covers), then the TSan build (the same; the
# interception core and preload libraries are never instrumented, see
# intercept/CMakeLists.txt); then the suite inside a Debian 13 root (ci/root-suite.sh),
# the MPI suites against Open MPI in a Debian 12 root (ci/openmpi-suite.sh), and the
# decoders' fuzz targets, 20 s each (ci/fuzz.sh; bench/fuzz.sh runs them for an hour).
# The Debian roots (11, 13 and unstable for the planner's libc corpus, 13 and 12 with Open
# MPI for the suites) are made once with debootstrap and kept in /var/cache/fanstore-roots.
# Usage: ci/test.sh            (as root on a fresh Debian 12 machine)
#        ci/test.sh --quick    the edit loop: the dev build, the unit tier (CTest label
#                              `unit`) and the format check; installs the dependencies only
#                              if the build lacks them
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --quick ]; then
  command -v clang-format >/dev/null && [ -f /usr/include/liburing.h ] || ci/install-deps.sh
  ci/build.sh dev
  ctest --preset dev -L unit -j"$(nproc)" --output-on-failure
  ci/format.sh --check
  exit
fi
ci/install-deps.sh
status=0
log=$(mktemp /tmp/fanstore-ci-XXXXXX.log)
trap 'rm -f "$log"' EXIT
# run_ctest ENV... -- ARGS...: CTest with its output kept for the closing count.
run_ctest() {
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" ctest "$@" 2>&1 | tee -a "$log"
  return "${PIPESTATUS[0]}"
}
echo "== Debian roots (made once, then cached)"
for r in bullseye trixie sid; do ci/debian-root.sh "$r" || status=1; done
# run_logged CMD...: CMD with its output kept for the closing count.
run_logged() {
  "$@" 2>&1 | tee -a "$log"
  return "${PIPESTATUS[0]}"
}
echo "== dev build: all tests"
ci/build.sh dev
run_ctest -- --preset dev -j"$(nproc)" || status=1
echo "== asan build (AddressSanitizer + UBSan)"
ci/build.sh asan
run_ctest ASAN_OPTIONS=detect_leaks=1 -- --preset asan -j"$(nproc)" -E 'fanstore_large_member|runtime_torchrun' || status=1
echo "== tsan build (ThreadSanitizer)"
ci/build.sh tsan
# (UCX_MEM_EVENTS=no: MPICH's UCX memory hooks crash inside ThreadSanitizer's interceptors
# when any thread of fanrun exits, e.g. the copier of a one-node staging; third-party code)
run_ctest TSAN_OPTIONS=halt_on_error=1 UCX_MEM_EVENTS=no -- --preset tsan -j"$(nproc)" -E 'fanstore_large_member|runtime_torchrun' || status=1
echo "== Debian 13 root: build and suite"
run_logged ci/debian-root.sh trixie /src/ci/root-suite.sh || status=1
echo "== Debian 12 root with Open MPI: the MPI suites"
run_logged ci/debian-root.sh bookworm:openmpi /src/ci/openmpi-suite.sh || status=1
echo "== fuzz build (clang, libFuzzer): each decoder briefly"
ci/fuzz.sh 20 2>&1 | tee -a "$log" || status=1
# One closing line for the whole run: CTest's tests of the five builds and the fuzz targets.
total=$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\1 \2/p' "$log" |
  awk '{f += $1; n += $2} END {print n - f, f}')
read -r passed failed <<<"${total:-0 0}"
fuzz_ok=$(grep -c '^fuzz: .*, 0 crashes$' "$log" || true)
fuzz_bad=$(grep -c '^fuzz: .* failed' "$log" || true)
skipped=$(grep -c 'Test *#[0-9]*: .*\*\*\*Skipped' "$log" || true)
echo "ci: $((passed - skipped + fuzz_ok)) passed, $((failed + fuzz_bad)) failed, $skipped skipped"
exit $status
