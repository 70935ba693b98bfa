#!/usr/bin/env bash
# fanrun with Charliecloud's ch-run as CMD (the container command unchanged): images made
# from Debian 11 and unstable roots read every file byte-exact at a mount path the image
# does not have, with the bundle's runtime library loaded into the image's own glibc; in
# place, staged to a --local-dir, and with two ranks under mpiexec (members of the other
# node through its agent's socket); a PyTorch DataLoader with 2 workers in an image of this
# machine's own files (the one image here with PyTorch); a write is EROFS; a static program
# in the image is refused before anything starts, and so is a path ch-run cannot bind; a DATA
# repacked under the job is refused, never read.
# Usage: charliecloud_test.sh SOURCE_DIR   (as root or a user with user namespaces; the
#        bundle and the Debian roots of ci/test.sh)
SRCDIR=$1
. "$SRCDIR/tests/bin/lib.sh"
command -v ch-run >/dev/null || { echo "SKIP: no ch-run (apt-get install charliecloud-runtime)"; exit 77; }
. "$SRCDIR/tests/containers/lib.sh"
FANRUN=$B/bin/fanrun
ran=0

for suite in bullseye sid; do
  IMG=$ROOTS/$suite
  if [ ! -x "$IMG/usr/bin/python3" ]; then
    skip "no $suite image with python3 at $IMG (ci/debian-root.sh $suite makes it)"
    continue
  fi
  ran=1
  [ ! -e "$IMG$MNT" ] && ok || bad "$IMG has $MNT"
  timeout 300 "$FANRUN" --data "$DS" --mount "$MNT" -- \
    ch-run "$IMG" -- python3 "$S/reader.py" "$MNT" "$S/$suite.sum" 2>"$S/$suite.err"
  same_as_native "$S/$suite.sum" "ch-run, $suite image, in place ($(head -c 300 "$S/$suite.err"))"
  out=$(timeout 300 "$FANRUN" --data "$DS" --mount "$MNT" -- ch-run "$IMG" -- python3 "$S/writer.py" "$MNT/new" 2>&1)
  [ "$out" = EROFS ] && ok || bad "a write into the mount, $suite image: $out"
done
[ "$ran" = 1 ] || { finish; exit $?; }
IMG=$ROOTS/bullseye
[ -x "$IMG/usr/bin/python3" ] || IMG=$ROOTS/sid

# Staged into a local directory, the container's options kept (a bind of its own, -c).
mkdir -p "$S/local" "$S/work"
timeout 300 "$FANRUN" --stage --local-dir "$S/local" --data "$DS" --mount "$MNT" -- \
  ch-run -b "$S/work:/mnt" -c /mnt "$IMG" -- python3 "$S/reader.py" "$MNT" /mnt/staged.sum 2>"$S/staged.err"
same_as_native "$S/work/staged.sum" "ch-run, staged to --local-dir ($(head -c 300 "$S/staged.err"))"

# Two ranks: each node holds its share, the rest comes from the other's agent.
if command -v mpiexec >/dev/null; then
  timeout 300 mpiexec -n 2 "$FANRUN" --local-dir "$S/local" --data "$DS" --mount "$MNT" -- \
    ch-run "$IMG" -- sh -c "python3 '$S/reader.py' '$MNT' '$S/rank'\$FANSTORE_RANK.sum" 2>"$S/ranks.err"
  for r in 0 1; do same_as_native "$S/rank$r.sum" "ch-run under mpiexec, rank $r ($(head -c 300 "$S/ranks.err"))"; done
else
  skip "no mpiexec: two ranks not run"
fi

# A static program in the image: named before anything starts, with the reason.
if [ -f "$IMG/sbin/ldconfig" ]; then
  expect_rc 125 "a static program in the image" -- "$FANRUN" --data "$DS" --mount "$MNT" -- ch-run "$IMG" -- /sbin/ldconfig -p
  expect_err_line "/sbin/ldconfig is statically linked in $IMG: the runtime cannot load into it" "the static program's line"
fi

# A path the container runtime's bind option cannot take (it splits on ':'): one line, before
# anything starts.
cp -r "$DS" "$S/da:ta"
expect_rc 125 "DATA with a ':' in its path" -- "$FANRUN" --data "$S/da:ta" --mount "$MNT" -- ch-run "$IMG" -- true
expect_err_line "ch-run cannot be handed $S/da:ta: its binds cannot take a path with ':'" "the path and the reason"

# DATA repacked while the job runs: the job's processes that open the blob after it read
# nothing of the new dataset (outside a container they go on reading the old one).
cp -r "$DS" "$S/moving"
mkdir -p "$S/other/a"
for i in $(seq 1 50); do head -c 1000 /dev/urandom >"$S/other/a/f$i.bin"; done
cat >"$S/repack.sh" <<SH
python3 -c 'open("$MNT/a/b/x.txt", "rb").read()' || exit 3
"$B/bin/fanstore" pack -q --force --partitions 3 "$S/other" "$S/moving" || exit 4
python3 "$S/reader.py" "$MNT" "$S/repacked.sum" 2>"$S/repacked.pyerr"
echo "reader \$?"
SH
# (the repack runs on the host: the image's processes run fanstore from the host's bundle
# only through /tmp, which ch-run shares)
timeout 300 "$FANRUN" --no-stage --data "$S/moving" --mount "$MNT" -- ch-run "$IMG" -- sh "$S/repack.sh" >"$S/repack.out" 2>"$S/repack.err"
grep -q "^reader 1$" "$S/repack.out" && ok || bad "a reader after the repack fails: $(cat "$S/repack.out" "$S/repack.err" | head -5)"
grep -q "Input/output error" "$S/repacked.pyerr" && ok || bad "the reader's error is EIO: $(tail -1 "$S/repacked.pyerr")"
grep -qE "part-0000[0-2].fsb: (not the file this job started with|cannot be opened)" "$S/repacked.pyerr" && ok ||
  bad "the log names the blob and why: $(head -3 "$S/repacked.pyerr")"

# PyTorch: a DataLoader with 2 workers in an image made of this machine's /usr and /etc.
if /usr/bin/python3 -c 'import torch, torchvision' 2>/dev/null && command -v unshare >/dev/null; then
  /usr/bin/python3 -c "
from PIL import Image
import os, random
random.seed(1)
for c in range(3):
    os.makedirs('$S/imgs/class%d' % c)
    for i in range(16):
        Image.new('RGB', (40 + i, 30 + c), tuple(random.randrange(256) for _ in range(3))).save('$S/imgs/class%d/%d.png' % (c, i))
"
  "$B/bin/fanstore" pack -q "$S/imgs" "$S/imgs.ds" || bad "pack the images"
  /usr/bin/python3 "$SRCDIR/tests/runtime/torch_probe.py" "$S/imgs" fork >"$S/torch.native" 2>/dev/null
  cp "$SRCDIR/tests/runtime/torch_probe.py" "$S/"
  H=$S/hostimg
  mkdir -p "$H"/{usr,etc,dev,proc,sys,tmp,home,mnt,run,root,var}
  for l in bin sbin lib lib64; do ln -s usr/$l "$H/$l"; done
  timeout 600 unshare -m sh -c "mount --make-rprivate / && mount --bind -o ro /usr '$H/usr' && mount --bind -o ro /etc '$H/etc' &&
    '$FANRUN' --data '$S/imgs.ds' --mount '$MNT' -- ch-run '$H' -- /usr/bin/python3 '$S/torch_probe.py' '$MNT' fork" \
    >"$S/torch.fan" 2>"$S/torch.err"
  [ -s "$S/torch.native" ] && cmp -s "$S/torch.native" "$S/torch.fan" && ok ||
    bad "a DataLoader with 2 workers inside ch-run yields what it yields natively: $(head -c 300 "$S/torch.err")"
else
  skip "no PyTorch on this machine (python3-torch): the DataLoader in a container not run"
fi
finish
