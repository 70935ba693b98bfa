#!/usr/bin/env bash
# Makes this x86-64 machine run arm64 programs through qemu-user: installs
# qemu-user-static and binfmt-support when missing, mounts binfmt_misc and enables
# qemu-aarch64 (with the F flag, so a chroot needs no copy of the emulator). As root;
# idempotent. Exits 1, with the reason, when the kernel refuses.
set -euo pipefail
if ! command -v qemu-aarch64-static >/dev/null || ! command -v update-binfmts >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends qemu-user-static binfmt-support >/dev/null
fi
[ -e /proc/sys/fs/binfmt_misc/register ] ||
  mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc ||
  { echo "qemu-binfmt: cannot mount binfmt_misc (a container without it?)" >&2; exit 1; }
update-binfmts --enable qemu-aarch64 2>/dev/null || true
grep -q '^enabled' /proc/sys/fs/binfmt_misc/qemu-aarch64 2>/dev/null ||
  { echo "qemu-binfmt: qemu-aarch64 is not enabled in binfmt_misc" >&2; exit 1; }
