#!/usr/bin/env bash
# Remote fetches, one build against another: `mpiexec -n 2 fanrun --replicas 1`, each rank's
# fsbench reading every file once (half of the members fetched from the other rank over
# MPI, the first contact), in two modes: `ahead` (the default --fetch-ahead: a member with
# its neighbours) and `alone` (--fetch-ahead 0: one MPI round trip per member, the most MPI
# calls per byte). The builds take turns in each round; files/s per run is the sum over the
# two ranks; the medians, ranges and each round's B/A ratio go to stdout and
# bench/results/remote_fetch.json. For changes to the agent or the MPI layer.
# Usage: bench/remote_fetch.sh BIN_A BIN_B [--files N] [--mean-kb K] [--rounds R] [--work DIR]
#   BIN_x: a directory holding fanrun, fanstore and fsbench (e.g. build/release/bin)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh  # drop_format_1
usage() { sed -n '2,10s/^# \{0,1\}//p' "$0"; }
case ${1:-} in -h | --help) usage; exit 0 ;; esac
[ $# -ge 2 ] || { usage >&2; exit 2; }
bin_a=$(cd "$1" && pwd) bin_b=$(cd "$2" && pwd)
shift 2
files=6000 mean_kb=60 rounds=5 work=bench/work
while [ $# -gt 0 ]; do
  case $1 in
    --files) files=$2; shift 2 ;;
    --mean-kb) mean_kb=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    *) echo "remote_fetch.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$work" bench/results
work=$(cd "$work" && pwd)
export FANSTORE_CACHE_DIR=$work/plan-cache FANSTORE_QUIET=1
mkdir -p "$FANSTORE_CACHE_DIR" && chmod 700 "$FANSTORE_CACHE_DIR"
tree=$work/fetch-$files-$mean_kb
[ -d "$tree" ] || bench/gen_dataset.py imagenet "$tree" --files "$files" --classes 50 --mean-kb "$mean_kb" --val-fraction 0
packed=$tree.packed
drop_format_1 "$packed"
[ -d "$packed" ] || "$bin_a/fanstore" pack -q "$tree" "$packed" --partitions 16
mnt=$work/fetch-mnt
results=$work/fetch-results
rm -rf "$results" && mkdir -p "$results"

run() {  # run BUILD BIN MODE ROUND
  local opts=(--replicas 1)
  [ "$3" = alone ] && opts+=(--fetch-ahead 0)
  mpiexec -n 2 "$2/fanrun" --data "$packed" --mount "$mnt" "${opts[@]}" -- \
    sh -c "\"$2/fsbench\" --op read --epochs 1 --json \"$mnt/train\" >\"$results/$1.$3.$4.\$FANSTORE_RANK\"" \
    2>"$results/err" || { cat "$results/err" >&2; exit 1; }
}
run a "$bin_a" ahead 0 && run b "$bin_b" ahead 0  # warm-up: plan caches, binaries' pages
for round in $(seq "$rounds"); do
  for mode in ahead alone; do
    echo "remote_fetch: round $round of $rounds, $mode" >&2
    if [ $((round % 2)) = 1 ]; then run a "$bin_a" $mode $round; run b "$bin_b" $mode $round
    else run b "$bin_b" $mode $round; run a "$bin_a" $mode $round; fi
  done
done
/usr/bin/python3 - "$results" "$rounds" "$bin_a" "$bin_b" <<'PYEOF' | tee bench/results/remote_fetch.json
import json, statistics, sys
results, rounds, a, b = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
out = {"a": a, "b": b, "rounds": rounds}
for mode in ("ahead", "alone"):
    rate = {}
    for build in ("a", "b"):
        rate[build] = [round(sum(json.load(open("%s/%s.%s.%d.%d" % (results, build, mode, r, k)))["items_per_s"]
                                 for k in (0, 1))) for r in range(1, rounds + 1)]
        out["%s_%s_files_per_s" % (mode, build)] = round(statistics.median(rate[build]))
        out["%s_%s_range" % (mode, build)] = [min(rate[build]), max(rate[build])]
    out["%s_b_vs_a_per_round" % mode] = [round(y / x, 3) for x, y in zip(rate["a"], rate["b"])]
print(json.dumps(out, indent=1))
PYEOF
