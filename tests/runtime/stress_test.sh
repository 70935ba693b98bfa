#!/usr/bin/env bash
# Concurrency through the runtime: 16 threads reading random members (whole, in 4 KiB
# chunks, in pread halves) with dup and lseek, and a fork-heavy run whose children share
# an fd's offset with the parent; every byte checked against checksums made natively.
# Usage: stress_test.sh FANSTORE FANRUN STRESS SOURCE_DIR
FANSTORE=$1
FANRUN=$2
STRESS=$3
SRCDIR=$4
. "$SRCDIR/tests/bin/lib.sh"
S=$SCRATCH
/usr/bin/python3 "$SRCDIR/bench/gen_dataset.py" imagenet "$S/src/img" --files 200 --classes 5 --mean-kb 20 >/dev/null
/usr/bin/python3 "$SRCDIR/bench/gen_dataset.py" text "$S/src/txt" --files 60 --mean-kb 30 >/dev/null
MNT=$S/mnt
# "path size fnv1a" for every file, with paths under the mount point.
/usr/bin/python3 - "$S/src" "$MNT" >"$S/list" <<'PY'
import os, sys
src, mnt = sys.argv[1], sys.argv[2]
for root, _, files in os.walk(src):
    for f in files:
        p = os.path.join(root, f)
        h = 1469598103934665603
        for b in open(p, "rb").read():
            h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
        print(mnt + p[len(src):], os.path.getsize(p), "%x" % h)
PY
for mode in auto none; do
  "$FANSTORE" pack -q --compress $mode --partitions 3 "$S/src" "$S/p$mode" || bad "pack"
  expect_rc 0 "16 threads ($mode)" -- "$FANRUN" --data "$S/p$mode" --mount "$MNT" -- "$STRESS" threads "$S/list" 400
  expect_rc 0 "fork-heavy ($mode)" -- "$FANRUN" --data "$S/p$mode" --mount "$MNT" -- "$STRESS" forks "$S/list" 60
done
finish
