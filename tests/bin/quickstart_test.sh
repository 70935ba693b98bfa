#!/usr/bin/env bash
# The README's "Quick start: your own data", run as it is written: its command lines are
# taken from the README, with build/release/bin/ standing for this build's tools and
# /data/ for a scratch directory, and the train.py it names reading every file of the
# dataset; what train.py prints under fanrun must be what it prints natively.
# Usage: quickstart_test.sh BINDIR SOURCE_DIR
BINDIR=$1
SRCDIR=$2
. "$SRCDIR/tests/bin/lib.sh"
S=$SCRATCH
export PATH=/usr/bin:$PATH  # python3: Debian's
mapfile -t lines < <(sed -n '/^## Quick start: your own data/,/^## /p' "$SRCDIR/README.md" |
  sed -n 's|^    \(build/release/bin/.*\)|\1|p')
[ "${#lines[@]}" -eq 3 ] && ok || bad "the README's quick start has 3 command lines, found ${#lines[@]}"
mkdir -p "$S/data" "$S/work"
/usr/bin/python3 "$SRCDIR/bench/gen_dataset.py" imagenet "$S/data/mydataset" --files 200 --classes 4 --mean-kb 4 >/dev/null
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
done
grep -qE "^[0-9]{3} files " "$S/native.out" && ok || bad "native train.py: $(cat "$S/native.out")"
expect_same "$S/native.out" "$S/step.out" "train.py under fanrun, as the quick start runs it"
finish
