#!/usr/bin/env bash
# Runs a command inside a Debian root of another release (bullseye, trixie, sid, ...),
# made once with debootstrap from this machine's own Debian mirror and cached under
# $FANSTORE_ROOTS (default /var/cache/fanstore-roots) for later runs. The repository is
# bound at /src inside the root (and at its own path with FANSTORE_ROOT_SAME_PATH=1), and
# /proc, /sys, /dev, /dev/pts and /dev/shm are bound for the command's time. With no command, only makes the root.
# Usage: ci/debian-root.sh SUITE[:FLAVOUR] [CMD [ARGS...]]      (as root)
#        ci/debian-root.sh --mirror   prints the mirror the roots are made from (the
#                                     first of /etc/apt's sources, or $FANSTORE_APT_DIR's)
#   e.g. ci/debian-root.sh trixie bash -c 'cd /src && ci/install-deps.sh --no-python'
#   A FLAVOUR names a separate root of the same release (bookworm:openmpi, whose packages
#   must not meet the host's or another root's). The flavour arm64 makes an arm64 root,
#   run through qemu-user (binfmt_misc is mounted and qemu-aarch64 enabled here).
set -euo pipefail
cd "$(dirname "$0")/.."
. ci/lib.sh  # apt_mirror
[ "${1:-}" != --mirror ] || { apt_mirror; exit; }
spec=${1:?usage: ci/debian-root.sh SUITE[:FLAVOUR] [CMD...]}
shift
suite=${spec%%:*}
name=$suite
[ "$spec" = "$suite" ] || name=$suite-${spec#*:}
roots=${FANSTORE_ROOTS:-/var/cache/fanstore-roots}
root=$roots/$name
arch_opts=()
if [ "${spec#*:}" = arm64 ] && [ "$(dpkg --print-architecture)" != arm64 ]; then
  ci/qemu-binfmt.sh
  arch_opts=(--arch=arm64)
fi
# One user of a root at a time: another run's clean-up would unmount this run's binds.
mkdir -p "$roots"
exec 9>"$roots/$name.lock"
flock 9
if [ ! -x "$root/usr/bin/apt-get" ] || [ ! -e "$root/.fanstore-complete" ]; then
  command -v debootstrap >/dev/null || {
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
  }
  # The mirror this machine's apt uses (deb822 sources first, then the one-line format).
  mirror=$(apt_mirror) || { echo "debian-root: cannot make $root without a mirror" >&2; exit 1; }
  echo "debian-root: making $root ($suite from $mirror; a few minutes, once)"
  rm -rf "$root" && mkdir -p "$roots"
  debootstrap "${arch_opts[@]}" --variant=minbase --include=ca-certificates,python3 "$suite" "$root" "$mirror" >"$roots/$name.log" 2>&1 ||
    { echo "debian-root: debootstrap failed; see $roots/$name.log" >&2; tail -5 "$roots/$name.log" >&2; exit 1; }
  # The mirror may serve a snapshot whose Release files of a moving suite (sid) have
  # expired; a test root takes them as they are.
  echo 'Acquire::Check-Valid-Until "false";' >"$root/etc/apt/apt.conf.d/99fanstore-snapshot"
  touch "$root/.fanstore-complete"
fi
[ $# -gt 0 ] || exit 0
mkdir -p "$root/src"
binds=()
cleanup() {
  for ((i = ${#binds[@]} - 1; i >= 0; i--)); do umount -l "${binds[i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
# The root bound onto itself, private: "/" inside is then a mount point of its own, so
# `unshare -m` works there (tests make private mount namespaces) and nothing mounted
# inside propagates out.
mount --bind "$root" "$root" && binds+=("$root")
mount --make-private "$root"
for d in proc sys dev dev/pts dev/shm; do
  mkdir -p "$root/$d"
  mount --bind "/$d" "$root/$d" && binds+=("$root/$d")
done
# The cgroup file systems below /sys (slurmd will not start without them), with every mount
# under them, receiving the host's changes and sending none back.
if mount --rbind /sys/fs/cgroup "$root/sys/fs/cgroup" 2>/dev/null; then
  binds+=("$root/sys/fs/cgroup")
  mount --make-rslave "$root/sys/fs/cgroup"
fi
mount --bind "$(pwd)" "$root/src" && binds+=("$root/src")
# FANSTORE_ROOT_SAME_PATH=1: the repository also at its own path, for a build tree made
# outside the root (a cross build's CTest files name their sources and programs there).
if [ "${FANSTORE_ROOT_SAME_PATH:-}" = 1 ] && [ "$(pwd)" != /src ]; then
  mkdir -p "$root$(pwd)"
  mount --bind "$(pwd)" "$root$(pwd)" && binds+=("$root$(pwd)")
fi
# The root shares this machine's network and host name, so its name resolution too (a
# minbase root has no /etc/hosts, and MPICH 3's TCP channel resolves the host's name).
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
cp /etc/hosts "$root/etc/hosts" 2>/dev/null || true
chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  HOME=/root TERM="${TERM:-dumb}" LANG=C.UTF-8 "$@" 9>&-
