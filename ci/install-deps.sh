#!/usr/bin/env bash
# Installs every build and test dependency of FanStore from Debian packages.
# Idempotent: when everything is already there it prints nothing and exits 0.
# Usage: ci/install-deps.sh [--no-python]   (as root, or with sudo on PATH)
set -euo pipefail

build_pkgs=(cmake g++ make pkg-config git
  liburing-dev libisal-dev robin-map-dev libspdlog-dev libfmt-dev
  libmpich-dev mpich libzydis-dev libcli11-dev libgtest-dev libgmock-dev)
test_pkgs=(clang libfuzzer-14-dev libclang-rt-14-dev python3 python3-numpy python3-pil python3-torch python3-torchvision python3-lmdb python3-h5py
  squashfs-tools squashfuse fuse3 gnuplot-nox bc coreutils findutils tar diffutils procps util-linux
  util-linux-extra
  strace)

want=("${build_pkgs[@]}")
[[ "${1:-}" == "--no-python" ]] || want+=("${test_pkgs[@]}")

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
