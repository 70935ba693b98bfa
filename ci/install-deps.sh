#!/usr/bin/env bash
# Installs every build and test dependency of FanStore from Debian packages.
# Idempotent: when everything is already there it prints nothing and exits 0.
# Usage: ci/install-deps.sh [--no-python | --no-torch] [--openmpi]   (as root, or with sudo)
#   --no-python  the build's packages only
#   --no-torch   everything but PyTorch, the fuzzing toolchain (clang 14) and Slurm, which
#                other Debian releases do not have or do not need for the suite
#   --openmpi    Open MPI instead of MPICH (only in a root of its own: it takes over
#                /usr/bin/mpiexec)
set -euo pipefail

build_pkgs=(cmake g++ make pkg-config git
  liburing-dev libisal-dev libzstd-dev liblzma-dev robin-map-dev libspdlog-dev libfmt-dev
  libzydis-dev libcli11-dev libgtest-dev libgmock-dev)
mpi_pkgs=(libmpich-dev mpich)
test_pkgs=(clang libfuzzer-14-dev libclang-rt-14-dev python3 python3-numpy python3-pil python3-torch python3-torchvision python3-lmdb python3-h5py
  zip zstd xz-utils squashfs-tools squashfuse fuse3 gnuplot-nox bc coreutils findutils tar diffutils procps util-linux
  util-linux-extra
  strace gdb slurm-wlm munge clang-format charliecloud-runtime bubblewrap)

tests=all
for a in "$@"; do
  case "$a" in
    --no-python) tests=none ;;
    --no-torch) tests=no-torch ;;
    --openmpi) mpi_pkgs=(libopenmpi-dev openmpi-bin) ;;
    *) echo "install-deps: unknown option $a (see the usage in $0)" >&2; exit 2 ;;
  esac
done
want=("${build_pkgs[@]}" "${mpi_pkgs[@]}")
for p in "${test_pkgs[@]}"; do
  case "$tests:$p" in
    none:*) ;;
    no-torch:python3-torch | no-torch:python3-torchvision | no-torch:clang | no-torch:libfuzzer-14-dev | no-torch:libclang-rt-14-dev) ;;
    no-torch:slurm-wlm | no-torch:munge | no-torch:clang-format | no-torch:gdb) ;;  # (on the host)
    no-torch:charliecloud-runtime | no-torch:bubblewrap) ;;  # (the container tests: on the host)
    *) want+=("$p") ;;
  esac
done

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

SUDO=""
[[ $(id -u) -eq 0 ]] || SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
