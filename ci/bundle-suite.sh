#!/usr/bin/env bash
# The bundle (ci/bundle.sh) where a cluster user runs it: in Debian 11 roots (glibc 2.31)
# that hold only python3 and one MPI's runtime packages, MPICH 3.4 (`mpich`) in one and
# Open MPI 4.1 (`openmpi-bin`) in the other, and a Debian 13 root with Open MPI 5; no
# compiler and no -dev package. In each,
# tests/bundle/cluster_test.sh: pack, verify, one node, two ranks under that MPI's launcher.
# An aarch64 bundle runs in the arm64 Debian 12 root with MPICH, through qemu-user
# (ci/arm64.sh makes the root).
# Usage: ci/bundle-suite.sh [TARBALL]   (as root; default: this machine's architecture's
#                                       build/bundle/fanstore-*-linux-ARCH.tar.gz)
set -euo pipefail
cd "$(dirname "$0")/.."
tarball=${1:-$(ls -t build/bundle/fanstore-*-linux-"$(uname -m)".tar.gz 2>/dev/null | head -1 || true)}
[ -n "$tarball" ] && [ -f "$tarball" ] ||
  { echo "bundle-suite: no bundle; make one with ci/bundle.sh" >&2; exit 1; }
case $tarball in /*) ;; *) tarball=$(pwd)/$tarball ;; esac
[[ $tarball == "$(pwd)"/* ]] || { echo "bundle-suite: $tarball is not inside the repository" >&2; exit 1; }
rc=0
roots="bullseye:mpich bullseye:openmpi trixie:openmpi"
case $tarball in *-linux-aarch64.tar.gz) [ "$(uname -m)" = aarch64 ] || roots=bookworm:arm64 ;; esac
for root in $roots; do
  mpi=${root#*:}
  [ "$mpi" != arm64 ] || mpi=mpich
  pkg=$mpi
  [ "$mpi" = mpich ] || pkg=openmpi-bin
  ci/debian-root.sh "$root" bash -c "dpkg -s $pkg >/dev/null 2>&1 ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends $pkg >/dev/null; }"
  echo "== the bundle in ${root%%:*} with $pkg"
  ci/debian-root.sh "$root" bash "/src/tests/bundle/cluster_test.sh" \
    "/src/${tarball#"$(pwd)"/}" "$mpi" || rc=1
done
exit $rc
