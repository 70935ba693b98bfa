#!/usr/bin/env bash
# Large members (over 8 MiB stored: tar shards, HDF5/LMDB/.npy files, text corpora) under
# `mpiexec -n 2 fanrun`, two ranks simulating two nodes: each rank reads the members it
# holds (local) and the members the other rank holds (remote: fetched over MPI by the 1 MiB
# piece, io/pieces.h), and two processes make the same reads natively from the source
# files (page cache warm). Two ways of reading (bench/large_read.py): "seq", every file in
# 1 MiB reads (MB/s), and "rand", 4 KiB reads at random offsets (reads/s); each twice,
# pass 1 being the first contact (a remote piece comes over MPI) and pass 2 the same reads
# again (from the node cache), and for rand a pass 3 at other offsets (a new epoch of a
# worker that stays). Every configuration runs --rounds times, alternating; medians and
# ranges. FANRUN=path/to/fanrun runs another build's fanrun on the same data.
# Writes bench/results/large.json.
# Usage: bench/large.sh [--files N] [--mib M] [--count C] [--rounds R] [--work DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
files=4 mib=192 count=2000 rounds=3 work=bench/work
while [ $# -gt 0 ]; do
  case $1 in
    --files) files=$2; shift 2 ;;
    --mib) mib=$2; shift 2 ;;
    --count) count=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "large.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
for v in "$files" "$mib" "$count" "$rounds"; do
  case $v in ''|*[!0-9]*|0) echo "large.sh: '$v': not a positive whole number" >&2; exit 2 ;; esac
done
# (FANRUN may name another build's fanrun, to compare two builds on the same data)
FANSTORE=$PWD/build/release/bin/fanstore FANRUN=${FANRUN:-$PWD/build/release/bin/fanrun}
[ -x "$FANRUN" ] && [ -x "$FANSTORE" ] || ci/build.sh release >/dev/null
PY=/usr/bin/python3
READ=$PWD/bench/large_read.py
mkdir -p "$work" bench/results
work=$(cd "$work" && pwd)
export FANSTORE_CACHE_DIR=$work/plan-cache
mkdir -p "$FANSTORE_CACHE_DIR" && chmod 700 "$FANSTORE_CACHE_DIR"
tree=$work/large-$files-$mib
if [ ! -d "$tree" ]; then
  echo "large: generating $files files of $mib MiB" >&2
  $PY - "$tree" "$files" "$mib" <<'PYEOF'
import os, sys
root, n, mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(root + ".tmp")
for i in range(n):
    with open(os.path.join(root + ".tmp", "shard%03d.bin" % i), "wb") as f:
        for _ in range(mib):
            f.write(os.urandom(1 << 20))
os.rename(root + ".tmp", root)
PYEOF
fi
packed=$tree.packed
[ -d "$packed" ] || $FANSTORE pack -q "$tree" "$packed" --partitions 2 --compress none
mnt=$work/large-mnt
results=$work/large-results
rm -rf "$results" && mkdir -p "$results"
# Which rank holds each file: partition p is on rank p mod 2.
for f in $(cd "$tree" && ls); do
  p=$($FANSTORE stat "$packed" "$f" | sed -n 's/.*Partition: part-0*\([0-9][0-9]*\)\.fsb/\1/p')
  echo "$f $((p % 2))"
done >"$results/holders"
cut -d' ' -f2 "$results/holders" | sort -u | wc -l | grep -qx 2 ||
  { echo "large: every file landed on one rank; use more --files" >&2; exit 1; }
# Each rank (or, natively, each of two processes under mpiexec): its own files first, then
# the other rank's, from ROOT (the mount point, or the source tree).
cat >"$work/large-reader.sh" <<EOF
#!/bin/sh
root=\$1 tag=\$2 rank=\${FANSTORE_RANK:-\$PMI_RANK}
mine=\$(awk -v r=\$rank '\$2 == r { print \$1 }' $results/holders)
theirs=\$(awk -v r=\$rank '\$2 != r { print \$1 }' $results/holders)
$PY $READ \$MODE \$root \$mine --count $count >$results/\$tag.local.\$rank
$PY $READ \$MODE \$root \$theirs --count $count >$results/\$tag.remote.\$rank
EOF
chmod +x "$work/large-reader.sh"
# Warm-up (untimed): the source files into the page cache, the binaries' pages, the plan cache.
MODE=seq mpiexec -n 2 "$work/large-reader.sh" "$tree" warmup
FANSTORE_QUIET=1 mpiexec -n 2 "$FANRUN" --data "$packed" --mount "$mnt" -- true
for round in $(seq "$rounds"); do
  for mode in seq rand; do
    echo "large: round $round of $rounds, $mode" >&2
    MODE=$mode mpiexec -n 2 "$work/large-reader.sh" "$tree" "$mode.$round.native"
    MODE=$mode FANSTORE_QUIET=1 mpiexec -n 2 "$FANRUN" --data "$packed" --mount "$mnt" \
      -- "$work/large-reader.sh" "$mnt" "$mode.$round.fanstore" 2>"$results/$mode.$round.err" ||
      { cat "$results/$mode.$round.err" >&2; exit 1; }
  done
done
$PY - "$results" "$rounds" "$files" "$mib" "$count" <<'PYEOF' | tee bench/results/large.json
import json, os, statistics, sys
results, rounds, files, mib, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
out = {"files": files, "mib": mib, "rand_count": count, "rounds": rounds, "rows": []}
# Per row the two ranks' rates summed (what the two nodes read at once); "native" rows are
# the same reads of the same halves from the source files by two processes.
for mode in ("seq", "rand"):
    for who in ("native", "fanstore"):
        for where in ("local", "remote"):
            for p in ("pass1", "pass2", "pass3") if mode == "rand" else ("pass1", "pass2"):
                vals = [sum(json.load(open(os.path.join(results, "%s.%d.%s.%s.%d" % (mode, r, who, where, k))))[p]
                            for k in (0, 1)) for r in range(1, rounds + 1)]
                out["rows"].append({"mode": mode, "who": who, "where": where, "pass": p,
                                    "unit": "MB/s" if mode == "seq" else "reads/s",
                                    "median": statistics.median(vals), "min": min(vals), "max": max(vals)})
print(json.dumps(out, indent=1))
PYEOF
