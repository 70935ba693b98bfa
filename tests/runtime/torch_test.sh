#!/usr/bin/env bash
# torchvision ImageFolder + DataLoader (2 workers, fork and spawn start methods) over a
# packed tree under fanrun yields the same (label, tensor checksum) multiset as natively.
# Usage: torch_test.sh FANSTORE FANRUN SOURCE_DIR
FANSTORE=$1
FANRUN=$2
SRCDIR=$3
. "$SRCDIR/tests/bin/lib.sh"
S=$SCRATCH
PY=/usr/bin/python3
if ! $PY -c "import torch, torchvision" 2>/dev/null; then
  echo "SKIP: python3-torch / python3-torchvision not installed (ci/install-deps.sh installs them)"
  finish
  exit $?
fi
$PY "$SRCDIR/bench/gen_dataset.py" imagenet "$S/src" --files 96 --classes 4 --mean-kb 5 --real-jpeg --val-fraction 0 >/dev/null
rm -f "$S/src/labels.csv" "$S/src/LOC_synset_mapping.txt"
$FANSTORE pack -q "$S/src" "$S/packed" || bad "pack"
MNT=$S/mnt
for method in fork spawn; do
  $PY "$SRCDIR/tests/runtime/torch_probe.py" "$S/src/train" $method >"$S/native.$method" 2>"$S/native.err" || bad "native DataLoader ($method): $(tail -3 "$S/native.err")"
  "$FANRUN" --data "$S/packed" --mount "$MNT" -- $PY "$SRCDIR/tests/runtime/torch_probe.py" "$MNT/train" $method \
    >"$S/fan.$method" 2>"$S/fan.err" || bad "DataLoader under fanrun ($method): $(tail -3 "$S/fan.err")"
  [ "$(wc -l <"$S/native.$method")" -eq 96 ] && ok || bad "native epoch yields 96 samples ($method)"
  expect_same "$S/fan.$method" "$S/native.$method" "DataLoader samples under fanrun ($method)"
done
finish
