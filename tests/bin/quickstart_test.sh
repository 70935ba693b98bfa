#!/usr/bin/env bash
# The README's "Quick start: your own data", run as it is written: its command lines are
# taken from the README, with build/release/bin/ standing for this build's tools and
# /data/ for a scratch directory, and the train.py it names reading every file of the
# dataset; what train.py prints under fanrun must be what it prints natively. The
# archives it packs are made here: ImageNet's shape (a tar of class tars) and 147
# WebDataset-style shards, and what they pack into is checked against their files.
# Usage: quickstart_test.sh BINDIR SOURCE_DIR
BINDIR=$1
SRCDIR=$2
. "$SRCDIR/tests/bin/lib.sh"
S=$SCRATCH
export PATH=/usr/bin:$PATH  # python3: Debian's
mapfile -t lines < <(sed -n '/^## Quick start: your own data/,/^## /p' "$SRCDIR/README.md" |
  sed -n 's|^    \(build/release/bin/.*\)|\1|p')
[ "${#lines[@]}" -eq 5 ] && ok || bad "the README's quick start has 5 command lines, found ${#lines[@]}"
mkdir -p "$S/data" "$S/work/shards" "$S/classes"
/usr/bin/python3 "$SRCDIR/bench/gen_dataset.py" imagenet "$S/data/mydataset" --files 200 --classes 4 --mean-kb 4 >/dev/null
T=$S/data/mydataset/train
for c in $(ls "$T"); do tar -C "$T/$c" -cf "$S/classes/$c.tar" .; done
tar -C "$S/classes" -cf "$S/work/ILSVRC2012_img_train.tar" .
mapfile -t all < <(cd "$T" && find . -type f | sort)
for k in $(seq 0 146); do
  part=()
  for ((i = k; i < ${#all[@]}; i += 147)); do part+=("${all[i]}"); done
  tar -C "$T" -cf "$S/work/shards/train-$(printf '%06d' "$k").tar" "${part[@]}"
done
cat >"$S/work/train.py" <<'PY'
import argparse, hashlib, os
ap = argparse.ArgumentParser()
ap.add_argument("--data")
root = ap.parse_args().data
n, h = 0, hashlib.sha256()
for d, dirs, files in os.walk(root):
    dirs.sort()
    for f in sorted(files):
        h.update(open(os.path.join(d, f), "rb").read())
        n += 1
print(n, "files", h.hexdigest())
PY
(cd "$S/work" && python3 train.py --data "$S/data/mydataset") >"$S/native.out"
for line in "${lines[@]}"; do
  cmd=${line//build\/release\/bin\//$BINDIR/}
  cmd=${cmd//\/data\//$S/data/}
  (cd "$S/work" && bash -c "$cmd") >"$S/step.out" 2>"$S/step.err"
  rc=$?
  [ $rc -eq 0 ] && ok || bad "'$line': exit $rc: $(head -c 500 "$S/step.err")"
  case $line in *fanrun*) cp "$S/step.out" "$S/train.out" ;; esac
done
grep -qE "^[0-9]{3} files " "$S/native.out" && ok || bad "native train.py: $(cat "$S/native.out")"
expect_same "$S/native.out" "$S/train.out" "train.py under fanrun, as the quick start runs it"
# The class tars became the class directories, and the shards one namespace: the same
# files with the same bytes as the training tree.
(cd "$T" && find . -type f | sort | xargs sha256sum) >"$S/train.sums"
for d in imagenet.packed wds.packed; do
  m=$S/mnt-$d
  "$BINDIR/fanrun" --data "$S/data/$d" --mount "$m" -- sh -c "cd '$m' && find . -type f | sort | xargs sha256sum" >"$S/$d.sums" 2>"$S/step.err" ||
    bad "$d under fanrun: $(head -c 300 "$S/step.err")"
  expect_same "$S/train.sums" "$S/$d.sums" "$d: the training tree's files and bytes"
done
finish
