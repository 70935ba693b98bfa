#!/usr/bin/env bash
# The aarch64 build and its suite under emulation, on this x86-64 machine: the build is
# cross-compiled (cmake/aarch64-linux-gnu.cmake, preset aarch64) against an arm64 Debian 12
# root, and the tests run inside that root through qemu-user (ci/qemu-binfmt.sh).
#   1. the arm64 root with the build's -dev packages and the tests' programs (made once,
#      under emulation: ~7 min), and the libc of Debian 11, 13 and unstable for arm64
#      (debootstrap --foreign: unpacked, not run)
#   2. the cross build (build/aarch64)
#   3. in the root: the unit tier, the interception tests, the arm64 libc corpus and the
#      program tests (coreutils, Python, numpy through fanrun, byte-exact against the same
#      command on the files), within a budget (FANSTORE_ARM64_BUDGET seconds of tests,
#      default 900): a stage that would start after it is reported as skipped, with why.
# What cannot run under emulation is skipped by the tests themselves, with the reason
# (tests/bin/lib.sh `emulated`); speed is not measured here (docs/bundle.md).
# Usage: ci/arm64.sh [--no-tests]     (as root on Debian 12 x86-64)
set -euo pipefail
cd "$(dirname "$0")/.."
. ci/lib.sh
tests=1
case "${1:-}" in
  --no-tests) tests=0 ;;
  "") ;;
  -h | --help) sed -n '2,15s/^# \{0,1\}//p' "$0"; exit 0 ;;
  *) echo "ci/arm64.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac
t0=$SECONDS
step() { echo "arm64: [$((SECONDS - t0)) s] $*"; }

step "qemu-user and the cross compiler"
# (A machine that cannot run arm64 programs at all, a container without binfmt_misc, skips
# the stage with the reason instead of failing it.)
if ! why=$(ci/qemu-binfmt.sh 2>&1); then
  echo "arm64: SKIP: the aarch64 stage: this machine cannot run arm64 programs ($why)"
  exit 0
fi
command -v aarch64-linux-gnu-g++ >/dev/null || {
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends g++-aarch64-linux-gnu >/dev/null
}

step "the arm64 Debian 12 root (made once)"
# The build's -dev packages (the cross compiler's sysroot) and what the tests run.
pkgs="libc6-dev libstdc++-12-dev liburing-dev libisal-dev libzstd-dev liblzma-dev robin-map-dev
  libspdlog-dev libfmt-dev libcli11-dev libgtest-dev libgmock-dev libmpich-dev mpich cmake
  python3-numpy python3-pil coreutils findutils diffutils procps xz-utils zstd strace util-linux-extra"
ci/debian-root.sh bookworm:arm64 bash -c "dpkg -s $(echo $pkgs) >/dev/null 2>&1 ||
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends $(echo $pkgs) >/dev/null; }"

step "the arm64 libc of Debian 11, 13 and unstable (unpacked once)"
corpus=build/aarch64/libc-corpus
for suite in bullseye trixie sid; do
  dir=$(arm64_libc_root "$suite")
  mkdir -p "$corpus/$suite/lib/aarch64-linux-gnu"
  for f in libc.so.6 libpthread.so.0; do
    src=$dir/lib/aarch64-linux-gnu/$f
    [ -e "$src" ] || src=$dir/usr/lib/aarch64-linux-gnu/$f
    [ -e "$src" ] && cp -L "$src" "$corpus/$suite/lib/aarch64-linux-gnu/$f"
  done
done

step "the cross build (build/aarch64)"
cmake --preset aarch64 >/dev/null
run_with_progress build/aarch64.log cmake --build --preset aarch64 -j"$(nproc)"
[ "$tests" = 1 ] || { step "built; no tests (--no-tests)"; exit 0; }

# The tests run in the root with the repository at its own path (the build tree names it).
budget=${FANSTORE_ARM64_BUDGET:-900}
t_tests=$SECONDS
failed=() not_run=()
in_root() {  # in_root NAME CTEST-ARGS...: one ctest run inside the root, if time is left
  local name=$1
  shift
  if [ $((SECONDS - t_tests)) -ge "$budget" ]; then
    not_run+=("$name")
    return
  fi
  step "in the root: $name"
  FANSTORE_ROOT_SAME_PATH=1 ci/debian-root.sh bookworm:arm64 bash -c \
    "cd $(pwd)/build/aarch64 && FANSTORE_ROOTS=$(pwd)/$corpus ctest -j$(nproc) --timeout 900 --output-on-failure $*" \
    >"build/aarch64-$name.log" 2>&1 || failed+=("$name")
  # (CTest's summary and its Skipped/Failed lines: ci/test.sh's closing count reads them)
  grep -E '^(FAIL|SKIP)|tests passed|libc-corpus:|\*\*\*(Skipped|Failed)' "build/aarch64-$name.log" |
    sed 's/^/   /' || true
}
in_root unit -L unit
in_root intercept -R "'^intercept_'"
in_root programs -R "'^(runtime_programs|runtime_syscall_driver|fanstore_cli)$'"
step "done"
[ ${#not_run[@]} -eq 0 ] ||
  echo "arm64: SKIP: ${not_run[*]}: not started within the ${budget} s budget (FANSTORE_ARM64_BUDGET)"
[ ${#failed[@]} -eq 0 ] || echo "arm64: FAILED: ${failed[*]} (logs: build/aarch64-NAME.log)"
[ ${#failed[@]} -eq 0 ]
