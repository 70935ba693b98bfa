#!/usr/bin/env bash
# What checking raw members against their CRC32C costs at the training pattern: epochs by
# 2 new processes each (DataLoader workers started for the epoch), fsbench on a generated
# ImageNet-like tree packed with --compress none, in three states: "first", a job's first
# epoch over a warm page cache (where the check is paid: once per member per node);
# "warm", 3 later epochs after an untimed one; "cold", one epoch with the page cache
# dropped. Targets, taking turns within each round: native, then
# fanrun in place and fanrun --stage (timed once the copy is done), each with the default
# check (once per member per node; staged copies are checked as they are made) and with
# FANSTORE_VERIFY=none (no check). Prints files/s per round, then medians and ratios, and
# writes bench/results/verify_cost.json.
# Usage: bench/verify_cost.sh [--files N] [--mean-kb K] [--rounds R] [--work DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
files=22000 mean_kb=85 rounds=5 work=bench/work
while [ $# -gt 0 ]; do
  case $1 in
    --files) files=$2; shift 2 ;;
    --mean-kb) mean_kb=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    -h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "verify_cost.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case $rounds in '' | *[!0-9]* | 0) echo "verify_cost.sh: --rounds $rounds: not a positive whole number" >&2; exit 2 ;; esac
FSBENCH=$PWD/build/release/bin/fsbench FANSTORE=$PWD/build/release/bin/fanstore FANRUN=$PWD/build/release/bin/fanrun
[ -x "$FANRUN" ] || ci/build.sh release >/dev/null
mkdir -p "$work" bench/results
work=$(cd "$work" && pwd)
tree=$work/compare-$files-$mean_kb
[ -d "$tree" ] || bench/gen_dataset.py imagenet "$tree" --files "$files" --classes 100 --mean-kb "$mean_kb"
packed=$work/verify-packed-$files-$mean_kb
[ -f "$packed/manifest" ] || "$FANSTORE" pack -q --compress none "$tree" "$packed"
can_drop=0
if (sync && echo 3 >/proc/sys/vm/drop_caches) 2>/dev/null; then can_drop=1; fi
wait_staged='i=0; while [ -e "$(dirname "$FANSTORE_IMAGE")/staging-from" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; exec "$@"'
rows=()
run() {  # run ROUND LABEL CACHE CMD...
  local round=$1 label=$2 cache=$3 json rate
  shift 3
  local extra=(--warmup --epochs 3 --fresh-processes --processes 2)
  [ "$cache" = first ] && extra=(--epochs 1 --fresh-processes --processes 2)
  [ "$cache" = cold ] && extra=(--drop-caches --epochs 1 --fresh-processes --processes 2)
  if ! json=$("$@" --op read --threads 1 "${extra[@]}" --json 2>"$work/err"); then
    echo "verify_cost.sh: $label $cache failed: $(head -c 300 "$work/err")" >&2
    return 0
  fi
  rate=$(/usr/bin/python3 -c 'import json,sys; print("%.0f" % json.load(sys.stdin)["items_per_s"])' <<<"$json")
  rows+=("{\"round\": $round, \"label\": \"$label\", \"cache\": \"$cache\", \"files_per_s\": $rate}")
  printf '  %d  %-28s %-5s %10s files/s\n' "$round" "$label" "$cache" "$rate"
}
echo "== $tree: $(find "$tree" -type f | wc -l) files; packed raw at $packed"
caches=(first warm)
[ $can_drop = 1 ] && caches+=(cold) || echo "   (cannot drop the page cache here: cold runs skipped)"
for cache in "${caches[@]}"; do
  for round in $(seq 1 "$rounds"); do
    run "$round" native "$cache" "$FSBENCH" "$tree"
    run "$round" "in place, checked" "$cache" "$FANRUN" --data "$packed" -- "$FSBENCH" "$tree"
    run "$round" "in place, VERIFY=none" "$cache" env FANSTORE_VERIFY=none "$FANRUN" --data "$packed" -- "$FSBENCH" "$tree"
    [ "$cache" != cold ] || continue  # (a staged copy is in memory: nothing to drop)
    run "$round" "--stage, checked" "$cache" "$FANRUN" --stage --data "$packed" -- sh -c "$wait_staged" sh "$FSBENCH" "$tree"
    run "$round" "--stage, VERIFY=none" "$cache" env FANSTORE_VERIFY=none "$FANRUN" --stage --data "$packed" -- sh -c "$wait_staged" sh "$FSBENCH" "$tree"
  done
done
printf '[\n%s\n]\n' "$(IFS=,; echo "${rows[*]}" | sed 's/},{/},\n{/g')" >bench/results/verify_cost.json
/usr/bin/python3 - bench/results/verify_cost.json <<'PY'
import json, statistics, sys
rows = json.load(open(sys.argv[1]))
for cache in ("first", "warm", "cold"):
    got = {}
    for r in rows:
        if r["cache"] == cache:
            got.setdefault(r["label"], []).append(r["files_per_s"])
    if not got:
        continue
    if "native" not in got:
        print("%s: no native run succeeded (above: why); no ratios" % cache)
        continue
    native = statistics.median(got["native"])
    print("%s: median files/s (ratio to native)" % cache)
    for label, v in got.items():
        m = statistics.median(v)
        print("  %-28s %10.0f  (%.2fx)" % (label, m, m / native))
PY
