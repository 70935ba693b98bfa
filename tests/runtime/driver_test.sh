#!/usr/bin/env bash
# The syscall driver on the native tree (a read-only bind mount of it, so writes fail with
# EROFS there too) and under fanrun on the packed tree, raw and compressed: every line of
# output (result and errno of each call) must be identical.
# Usage: driver_test.sh FANSTORE FANRUN DRIVER SOURCE_DIR
FANSTORE=$1
FANRUN=$2
DRIVER=$3
SRCDIR=$4
. "$SRCDIR/tests/bin/lib.sh"
# (outputs are compared with native ones: no start-up lines; DATA is local, so fanrun
# copies it to /dev/shm while the programs run where the node makes huge pages)
export FANSTORE_QUIET=1
S=$SCRATCH
T=$S/src
mkdir -p "$T/meta/empty dir" "$T/deep/a/b/c"
seq 1 3000 >"$T/meta/numbers.txt"
seq 3001 6000 >"$T/meta/numbers2.txt"  # packed raw, its first page follows numbers.txt's last
yes pages | head -c 5000 >"$T/meta/pages.bin"  # and a small member packed right after it:
printf 'the next member' >"$T/meta/pages.bin.next"  # the rest of pages.bin's last page
printf 'x' >"$T/meta/one"
echo leaf >"$T/deep/a/b/c/leaf.txt"
ln -s numbers.txt "$T/meta/link"
ln -s ../deep/a "$T/meta/dirlink"
echo outside >"$S/outside"
ln -s "$S/outside" "$T/meta/outlink"  # leaves the tree: following it reaches a writable file
touch -d '2021-03-04 05:06:07.5' "$T/meta/one"
RO=$S/ro
mkdir -p "$RO"
cleanup_ro() { umount "$RO" 2>/dev/null; }
if ! { mount --bind "$T" "$RO" && mount -o remount,ro,bind "$RO"; } 2>"$S/mount.err"; then
  cleanup_ro
  skip "a read-only bind mount is needed for the native side ($(head -1 "$S/mount.err"))"
  finish
  exit $?
fi
"$DRIVER" "$RO" >"$S/native.out" 2>&1
cleanup_ro
[ "$(wc -l <"$S/native.out")" -gt 100 ] && ok || bad "native driver run: $(tail -3 "$S/native.out")"
# Under qemu-user the native side has no openat2 (ENOSYS), which the runtime serves on the
# dataset itself: those lines are compared nowhere there.
drop=
if emulated && grep -q '^openat2 .*ENOSYS' "$S/native.out"; then
  drop='^openat2'
  skip "openat2 against the kernel's: qemu-user lacks the call"
fi
[ -z "$drop" ] || { grep -v "$drop" "$S/native.out" >"$S/native.kept"; mv "$S/native.kept" "$S/native.out"; }
for mode in none 3; do
  "$FANSTORE" pack -q --compress $mode "$T" "$S/p$mode" || bad "pack $mode"
  "$FANRUN" --data "$S/p$mode" --mount "$S/mnt" -- "$DRIVER" "$S/mnt" >"$S/fan.out" 2>&1
  [ -z "$drop" ] || { grep -v "$drop" "$S/fan.out" >"$S/fan.kept"; mv "$S/fan.kept" "$S/fan.out"; }
  if cmp -s "$S/native.out" "$S/fan.out"; then ok; else bad "driver output differs (compress $mode):
$(diff "$S/native.out" "$S/fan.out" | head -30)"; fi
done
finish
