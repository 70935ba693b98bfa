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
skip_without_torch
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
# The root as a script next to its data spells it (os.path.join(dirname(__file__), "..",
# "data")): a ".." after a native name in every sample's path.
mkdir -p "$S/code"
"$FANRUN" --data "$S/packed" --mount "$MNT" -- $PY "$SRCDIR/tests/runtime/torch_probe.py" "$S/code/../mnt/train" fork \
  >"$S/fan.dotdot" 2>"$S/fan.err" || bad "DataLoader under fanrun, root with a ..: $(tail -3 "$S/fan.err")"
expect_same "$S/fan.dotdot" "$S/native.fork" "DataLoader samples under fanrun, root code/../mnt/train"
# The root through a symlink the runtime was not told of (made after the start, as a
# config file names a project's data link): served from the dataset all the same.
"$FANRUN" --data "$S/packed" --mount "$MNT" -- sh -c 'ln -sfn "$1" "$2" && exec "$3" "$4" "$2/train" fork' \
  sh "$MNT" "$S/code/data" "$PY" "$SRCDIR/tests/runtime/torch_probe.py" >"$S/fan.link" 2>"$S/fan.err" ||
  bad "DataLoader under fanrun, root through a new symlink: $(tail -3 "$S/fan.err")"
expect_same "$S/fan.link" "$S/native.fork" "DataLoader samples under fanrun, root through a symlink made after the start"
# Two nodes (mpiexec ranks, each holding half the partitions): each rank's DistributedSampler
# share, read with fork workers through its agent, equals the same share read natively.
skip_without_mpi "DataLoader under mpiexec -n 2"
$FANSTORE pack -q "$S/src" "$S/packed4" --partitions 4 || bad "pack 4 partitions"
printf '#!/bin/sh
exec %s %s %s fork --distributed >%s/mpi.$FANSTORE_RANK
' \
  "$PY" "$SRCDIR/tests/runtime/torch_probe.py" "$MNT/train" "$S" >"$S/dist.sh"
chmod +x "$S/dist.sh"
FANSTORE_QUIET=1 timeout -k 10 600 mpiexec -n 2 "$FANRUN" --data "$S/packed4" --mount "$MNT" --local-dir "$S" \
  --stats "$S/mpi.stats" -- "$S/dist.sh" 2>"$S/mpi.err" || bad "DataLoader under mpiexec -n 2: $(tail -3 "$S/mpi.err")"
for r in 0 1; do
  FANSTORE_RANK=$r FANSTORE_NODES=2 $PY "$SRCDIR/tests/runtime/torch_probe.py" "$S/src/train" fork --distributed \
    >"$S/native.d$r" 2>>"$S/native.err" || bad "native distributed share $r"
  [ "$(wc -l <"$S/native.d$r")" -eq 48 ] && ok || bad "rank $r's share has 48 samples"
  expect_same "$S/mpi.$r" "$S/native.d$r" "DataLoader share of rank $r under mpiexec -n 2"
done
remote=$($PY -c "import json,sys; print(sum(json.loads(l).get('remote',0) for l in open(sys.argv[1])))" "$S/mpi.stats")
[ "$remote" -gt 0 ] && ok || bad "the distributed DataLoader read no member from the other node"
finish
