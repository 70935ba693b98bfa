#!/usr/bin/env bash
# A long job: 20 epochs of a PyTorch DataLoader (2 workers, new ones each epoch, fork and
# spawn in turn) under `mpiexec -n 2 fanrun`, every rank reading every file, so that half
# of them come through the node agents. Every epoch's samples must be the native epoch's,
# and fanrun (whose second thread is the agent) must hold flat memory and descriptors
# after epoch 2: a leak of a descriptor or a buffer per fetch or per worker shows here.
# Usage: soak_test.sh FANSTORE FANRUN SOURCE_DIR [EPOCHS]
FANSTORE=$1
FANRUN=$2
SRCDIR=$3
EPOCHS=${4:-20}
. "$SRCDIR/tests/bin/lib.sh"
S=$SCRATCH
PY=/usr/bin/python3
skip_without_torch
skip_without_mpi "the soak runs two ranks"
command -v mpiexec >/dev/null || { echo "SKIP: mpiexec not installed (ci/install-deps.sh installs mpich)"; exit 77; }
$PY "$SRCDIR/bench/gen_dataset.py" imagenet "$S/src" --files 160 --classes 4 --mean-kb 5 --real-jpeg --val-fraction 0 >/dev/null
rm -f "$S/src/labels.csv" "$S/src/LOC_synset_mapping.txt"
$FANSTORE pack -q "$S/src" "$S/packed" --partitions 4 || bad "pack"
PROBE=$SRCDIR/tests/runtime/soak_probe.py
# The native epoch's digest (the samples do not depend on the order, only on the bytes).
$PY "$PROBE" "$S/src/train" 1 >"$S/native" 2>"$S/native.err" || bad "native epoch: $(tail -3 "$S/native.err")"
want=$(awk '{print $4}' "$S/native")
[ -n "$want" ] && ok || bad "native epoch gave no digest"
MNT=$S/mnt
printf '#!/bin/sh\nexec %s %s %s %s >%s/soak.$FANSTORE_RANK\n' "$PY" "$PROBE" "$MNT/train" "$EPOCHS" "$S" >"$S/run.sh"
chmod +x "$S/run.sh"
mkdir -p "$S/local"
FANSTORE_QUIET=1 timeout -k 10 1200 mpiexec -n 2 "$FANRUN" --data "$S/packed" --mount "$MNT" --local-dir "$S/local" \
  --stats "$S/stats" -- "$S/run.sh" 2>"$S/run.err" || bad "the soak job: exit $?: $(tail -3 "$S/run.err")"
for r in 0 1; do
  f=$S/soak.$r
  [ "$(wc -l <"$f")" = "$EPOCHS" ] && ok || bad "rank $r ran $(wc -l <"$f") of $EPOCHS epochs"
  # Every epoch, fork and spawn alike, yields the native samples.
  wrong=$(awk -v w="$want" '$3 != 160 || $4 != w {print "epoch " $1 " (" $2 "): " $3 " samples, digest " $4}' "$f")
  [ -z "$wrong" ] && ok || bad "rank $r: epochs that differ from the native one: $wrong"
  # fanrun and its agent: descriptors exactly flat after epoch 2, memory within 2 MiB.
  read -r fds2 rss2 <<<"$(awk '$1 == 2 {print $8, $7}' "$f")"
  read -r fds_lo fds_hi rss_hi <<<"$(awk '$1 > 2 {if (lo == "" || $8 < lo) lo = $8; if ($8 > hi) hi = $8; if ($7 > r) r = $7}
    END {print lo, hi, r}' "$f")"
  [ "$fds_lo" = "$fds2" ] && [ "$fds_hi" = "$fds2" ] && ok ||
    bad "rank $r: fanrun's descriptors after epoch 2 ranged $fds_lo-$fds_hi, $fds2 at epoch 2"
  [ "$rss_hi" -le $((rss2 + 2048)) ] && ok ||
    bad "rank $r: fanrun's memory grew from $rss2 kB at epoch 2 to $rss_hi kB"
  # The training process itself: its descriptors do not grow with the epochs either (the
  # fewest of the last five epochs against epoch 3: a worker's pipes still closing as an
  # epoch is counted show in one epoch, a leak in every later one).
  read -r own3 own_last <<<"$(awk -v n="$EPOCHS" '$1 == 3 {t = $6} $1 > n - 5 && (m == "" || $6 < m) {m = $6}
    END {print t, m}' "$f")"
  [ "$own_last" -le "$own3" ] && ok ||
    bad "rank $r: the training process's descriptors grew from $own3 at epoch 3 to at least $own_last"
done
remote=$($PY -c "import json,sys; print(sum(json.loads(l).get('remote',0) for l in open(sys.argv[1])))" "$S/stats")
[ "$remote" -gt 0 ] && ok || bad "no member came from the other node"
echo "soak: rank 0, epoch: method, samples, digest, rss kB, fds, fanrun rss kB, fanrun fds"
cat "$S/soak.0"
finish
