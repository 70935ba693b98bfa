#!/usr/bin/env bash
# Makes the relocatable bundle, build/bundle/fanstore-VERSION-linux-ARCH.tar.gz: bin/fanrun,
# bin/fanstore, bin/fsbench and lib/ (the runtime library, the MPI plugins, and the two
# shared libraries the bundle carries). Unpacked anywhere, it runs on any Linux of that
# architecture with glibc 2.28 or later (RHEL 8, SLES 15, Debian 10 and later), without
# root and without an install step. See docs/bundle.md.
# How: the tools are linked against Debian 11's glibc (from a debootstrap root made once,
# ci/debian-root.sh bullseye:sysroot) with this machine's compiler, with libstdc++ and the
# other libraries linked in (cmake/bundle.cmake); tests/bundle/elf_test.sh checks the result.
# --arch aarch64 on x86-64 cross-builds (ci/arm64.sh makes the arm64 root it builds against;
# the old glibc is Debian 11's arm64 one, unpacked by debootstrap --foreign).
# Usage: ci/bundle.sh [--arch ARCH]   (as root on Debian 12; ARCH: this machine's, the default,
#                                     or aarch64)
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { sed -n '2,10s/^# \{0,1\}//p' "$0"; }
arch=$(uname -m)
while [ $# -gt 0 ]; do
  case $1 in
    --arch) arch=${2:?--arch needs a value}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "ci/bundle.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
cross=0
if [ "$arch" != "$(uname -m)" ]; then
  [ "$arch" = aarch64 ] && [ "$(uname -m)" = x86_64 ] ||
    { echo "ci/bundle.sh: --arch $arch: this machine builds $(uname -m) and aarch64 bundles" >&2; exit 2; }
  cross=1
fi
t0=$SECONDS
step() { echo "bundle: [$((SECONDS - t0)) s] $*"; }

[ -f /usr/include/liburing.h ] && command -v cmake >/dev/null || ci/install-deps.sh
. ci/lib.sh  # run_with_progress, arm64_libc_root
roots=${FANSTORE_ROOTS:-/var/cache/fanstore-roots}

# 1. The old glibc to link against: Debian 11's libc6-dev, in a root of its own.
step "Debian 11's glibc (a root made once)"
if [ $cross = 1 ]; then
  [ -e "$roots/bookworm-arm64/usr/lib/aarch64-linux-gnu/libisal.so" ] || ci/arm64.sh --no-tests
  root=$(arm64_libc_root bullseye)
  multiarch=aarch64-linux-gnu
else
  ci/debian-root.sh bullseye:sysroot bash -c 'dpkg -s libc6-dev >/dev/null 2>&1 ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends libc6-dev >/dev/null; }'
  root=$roots/bullseye-sysroot
  multiarch=$(gcc -print-multiarch)
fi
out=build/bundle
sysroot=$out/sysroot
[ $cross = 0 ] || sysroot=$out/sysroot-$arch
rm -rf "$sysroot"
mkdir -p "$sysroot/usr/lib/$multiarch" "$sysroot/lib/$multiarch" "$sysroot/lib64"
# copy_from_root DIR NAME...: each NAME of the root's DIR into the sysroot, symbolic links
# followed inside the root (the root's absolute links name its own files, not this machine's).
copy_from_root() {
  local dir=$1 name src
  shift
  for name in "$@"; do
    src=$root/$dir/$name
    local hops=0 to
    while [ -L "$src" ]; do
      hops=$((hops + 1))
      [ $hops -le 40 ] || { echo "bundle: $root/$dir/$name: a loop of symbolic links" >&2; exit 1; }
      to=$(readlink "$src")
      case $to in /*) src=$root$to ;; *) src=$(dirname "$src")/$to ;; esac
    done
    [ -f "$src" ] || { echo "bundle: $root/$dir/$name: not in the Debian 11 root" >&2; exit 1; }
    cp "$src" "$sysroot/$dir/$name"
  done
}
copy_from_root "usr/lib/$multiarch" Scrt1.o crt1.o crti.o crtn.o libc_nonshared.a libc.so \
  libm.so libpthread.so libdl.so librt.so
copy_from_root "lib/$multiarch" libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 librt.so.1
ld_so=$(sed -n 's/.*AS_NEEDED ( \(\/[^ ]*\) ).*/\1/p' "$sysroot/usr/lib/$multiarch/libc.so")
mkdir -p "$sysroot$(dirname "$ld_so")"
copy_from_root "$(dirname "${ld_so#/}")" "$(basename "$ld_so")"
if [ "$arch" = x86_64 ]; then  # (libm.so names it)
  copy_from_root "lib/$multiarch" libmvec.so.1
fi

# 2. Open MPI's <mpi.h> for its plugin (this machine's MPI is MPICH): from the Debian 12
# root that the Open MPI suite uses, whose packages must not meet this machine's.
step "Open MPI's headers (a root made once)"
if [ $cross = 1 ]; then
  # (unpacked, not installed: the arm64 root's mpiexec stays MPICH's)
  ompi=$roots/bookworm-arm64-openmpi-headers
  [ -f "$ompi/usr/lib/$multiarch/openmpi/include/mpi.h" ] ||
    ci/debian-root.sh bookworm:arm64 bash -c "mkdir -p /tmp/ompi-deb && cd /tmp/ompi-deb &&
      apt-get download libopenmpi-dev >/dev/null && mv libopenmpi-dev_*.deb /tmp/libopenmpi-dev.deb"
  [ -f "$ompi/usr/lib/$multiarch/openmpi/include/mpi.h" ] ||
    { mkdir -p "$ompi" && dpkg-deb -x "$roots/bookworm-arm64/tmp/libopenmpi-dev.deb" "$ompi"; }
  ompi_include=$ompi/usr/lib/$multiarch/openmpi/include
else
  ci/debian-root.sh bookworm:openmpi bash -c 'dpkg -s libopenmpi-dev >/dev/null 2>&1 ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends libopenmpi-dev >/dev/null; }'
  ompi_include=$roots/bookworm-openmpi/usr/lib/$multiarch/openmpi/include
fi
[ -f "$ompi_include/mpi.h" ] || { echo "bundle: no Open MPI <mpi.h> in $ompi_include" >&2; exit 1; }

# 3. The build: release flags, no tests, only what the bundle holds.
step "building (cmake/bundle.cmake; a few minutes)"
version=$(sed -n 's/^project(fanstore VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
build=$out/build
cross_args=()
if [ $cross = 1 ]; then
  build=$out/build-$arch
  cross_args=(-DCMAKE_TOOLCHAIN_FILE="$(pwd)/cmake/aarch64-linux-gnu.cmake")
fi
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DFANSTORE_BUILD_TESTS=OFF \
  -DFANSTORE_WERROR=ON -DFANSTORE_BUNDLE_SYSROOT="$(pwd)/$sysroot" -DCMAKE_INSTALL_LIBDIR=lib \
  -DFANSTORE_OPENMPI_INCLUDE="$ompi_include" "${cross_args[@]}" \
  >"$out/configure.log" 2>&1 || { tail -20 "$out/configure.log"; exit 1; }
run_with_progress "$out/build.log" cmake --build "$build" -j"$(nproc)" \
  --target fanrun fanstore fsbench fanstore_preload fanstore_mpi_mpich fanstore_mpi_openmpi

# 4. The tree: the installed files, the carried libraries, a README; then the tarball.
name=fanstore-$version-linux-$arch
stage=$out/$name
rm -rf "$stage"
cmake --install "$build" --prefix "$stage" >/dev/null
# carry FILE...: a system library into lib/, under its soname.
carry() {
  local f soname
  for f in "$@"; do
    soname=$(readelf -d "$f" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    cp -L "$f" "$stage/lib/$soname"
  done
}
if [ $cross = 1 ]; then  # (aarch64 plans its libc without Zydis)
  carry "$roots/bookworm-arm64/usr/lib/$multiarch/libisal.so.2"
else
  carry "/usr/lib/$multiarch/libisal.so.2" "/usr/lib/$multiarch/libZydis.so"
fi
cp docs/bundle.md "$stage/README.md"
tar -C "$out" -czf "$out/$name.tar.gz" "$name"
step "made $out/$name.tar.gz ($(du -h "$out/$name.tar.gz" | cut -f1))"
