#!/usr/bin/env bash
# PyTorch DataLoader epoch time (ImageFolder, decode + resize, 2 workers) on the same
# generated tree of real JPEGs, natively and under fanrun at the same path: medians of
# alternating warm runs, then one cold run each (page cache dropped, where permitted), then
# one warm --split epoch each: how much of the workers' time is reading the files, and how
# much decoding them. Writes bench/results/dataloader.json.
# Usage: bench/dataloader.sh [--files N] [--runs N]
set -euo pipefail
cd "$(dirname "$0")/.."
files=3000 runs=9
while [ $# -gt 0 ]; do
  case $1 in
    --files) files=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "dataloader.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
BIN=build/release/bin
[ -x $BIN/fanrun ] || ci/build.sh release >/dev/null
work=$PWD/bench/work
tree=$work/dl-$files packed=$work/dl-$files.packed
[ -d "$tree" ] || bench/gen_dataset.py imagenet "$tree" --files "$files" --classes 20 --mean-kb 100 --real-jpeg
[ -f "$packed/manifest" ] || $BIN/fanstore pack -q "$tree" "$packed"
epoch() {  # epoch native|fanstore -> seconds
  if [ "$1" = native ]; then bench/train_epoch.py "$tree/train" --json
  else $BIN/fanrun --data "$packed" -- bench/train_epoch.py "$tree/train" --json; fi |
    /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["seconds"])'
}
declare -A t
for i in $(seq "$runs"); do
  for m in native fanstore; do t[$m]+="$(epoch $m) "; done
done
med() { printf '%s\n' $1 | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
split() {  # split native|fanstore -> the --split epoch's JSON
  if [ "$1" = native ]; then bench/train_epoch.py "$tree/train" --split --json
  else $BIN/fanrun --data "$packed" -- bench/train_epoch.py "$tree/train" --split --json; fi
}
split_native=$(split native) split_fan=$(split fanstore)
cold_native=- cold_fan=-
if (sync && echo 3 >/proc/sys/vm/drop_caches) 2>/dev/null; then
  cold_native=$(epoch native)
  sync; echo 3 >/proc/sys/vm/drop_caches
  cold_fan=$(epoch fanstore)
fi
n=$(med "${t[native]}") f=$(med "${t[fanstore]}")
samples=$(find "$tree/train" -type f | wc -l)
printf 'DataLoader epoch, %d samples (2 workers, decode + resize), median of %d:\n' "$samples" "$runs"
printf '  warm: native %.3f s, fanstore %.3f s (%.2fx)\n' "$n" "$f" "$(echo "$n / $f" | bc -l)"
[ "$cold_native" = - ] || printf '  cold: native %.3f s, fanstore %.3f s (%.2fx)\n' "$cold_native" "$cold_fan" "$(echo "$cold_native / $cold_fan" | bc -l)"
for m in native fanstore; do
  [ $m = native ] && j=$split_native || j=$split_fan
  echo "$j" | /usr/bin/python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print("  %s, read whole then decoded: workers spent %.2f s reading, %.2f s decoding (reading %.0f%%)" % (sys.argv[1], d["worker_read_s"], d["worker_decode_s"], 100 * d["read_share"]))' $m
done
mkdir -p bench/results
echo "{\"benchmark\": \"dataloader\", \"samples\": $samples, \"runs\": $runs, \"native_s\": $n, \"fanstore_s\": $f, \"cold_native_s\": \"$cold_native\", \"cold_fanstore_s\": \"$cold_fan\", \"native_all\": \"${t[native]}\", \"fanstore_all\": \"${t[fanstore]}\", \"split_native\": $split_native, \"split_fanstore\": $split_fan}" >bench/results/dataloader.json
