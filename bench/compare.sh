#!/usr/bin/env bash
# Peer comparison: on the same generated ImageNet-like tree, in one run, fsbench measures
#   native   the tree on the local disk (warm page cache, and cold where caches can be dropped)
#   tmpfs    a copy in /dev/shm
#   squashfuse_ll  a squashfs image (mksquashfs, gzip) of the tree mounted with squashfuse_ll
#                  (skipped with a message where FUSE is not available)
#   fanstore the packed tree under `fanrun` (once the runtime exists; skipped before)
# and prints files/s with the ratio to native for stat and whole-file read, 1 and 2 threads.
# Writes bench/results/compare.json and, with gnuplot, bench/results/compare.png.
# Usage: bench/compare.sh [--files N] [--mean-kb K] [--seconds S] [--work DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
files=22000 mean_kb=85 seconds=2 work=bench/work
while [ $# -gt 0 ]; do
  case $1 in
    --files) files=$2; shift 2 ;;
    --mean-kb) mean_kb=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "compare.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
FSBENCH=$PWD/build/release/bin/fsbench FANSTORE=$PWD/build/release/bin/fanstore FANRUN=$PWD/build/release/bin/fanrun
[ -x "$FSBENCH" ] || ci/build.sh release >/dev/null
mkdir -p "$work" bench/results
work=$(cd "$work" && pwd)
tree=$work/compare-$files-$mean_kb
[ -d "$tree" ] || bench/gen_dataset.py imagenet "$tree" --files "$files" --classes 100 --mean-kb "$mean_kb"
out=bench/results/compare.json
rows=()
can_drop=0
if (sync && echo 3 >/proc/sys/vm/drop_caches) 2>/dev/null; then can_drop=1; fi

run() {  # run TARGET LABEL OP THREADS CACHE -- CMD-PREFIX... PATH
  local target=$1 label=$2 op=$3 threads=$4 cache=$5; shift 6
  # warm: one untimed pass, then epochs for $seconds (short runs of a fast target are all
  # noise); cold: caches dropped, one timed epoch.
  local extra=(--warmup --duration "$seconds")
  # A stat served from memory takes ~200 ns: two clock reads around each would be a tenth of
  # it, so stat latencies are sampled (every target alike); reads are all timed.
  [ "$op" = stat ] && extra+=(--latency-every 16)
  [ "$cache" = cold ] && extra=(--drop-caches --epochs 1)
  [ "$cache" = fresh ] && extra=(--epochs 1)
  local json
  if ! json=$("$@" --op "$op" --threads "$threads" "${extra[@]}" --json 2>"$work/err"); then
    echo "compare.sh: $label $op failed: $(head -c 300 "$work/err")" >&2
    return 0
  fi
  rows+=("{\"target\": \"$target\", \"label\": \"$label\", \"op\": \"$op\", \"threads\": $threads, \"cache\": \"$cache\", \"result\": $json}")
  local rate
  rate=$(echo "$json" | /usr/bin/python3 -c 'import json,sys; print("%.0f" % json.load(sys.stdin)["items_per_s"])')
  printf '  %-16s %-10s %-5s %d thr  %10s files/s\n' "$label" "$op" "$cache" "$threads" "$rate"
}

measure_all() {  # measure_all TARGET LABEL CMD-PREFIX... PATH
  local target=$1 label=$2; shift 2
  for op in stat read; do
    for t in 1 2; do run "$target" "$label" $op $t warm -- "$@"; done
  done
  # The first pass of a new process over page-cached data (as a DataLoader worker that is
  # started for each epoch sees it): warm runs above re-read in one process.
  run "$target" "$label" read 1 fresh -- "$@"
  if [ $can_drop = 1 ]; then run "$target" "$label" read 2 cold -- "$@"; fi
}

echo "== $tree: $(find "$tree" -type f | wc -l) files, $(du -sh --apparent-size "$tree" | cut -f1)"
[ $can_drop = 1 ] || echo "   (cannot drop the page cache here: cold runs skipped)"
measure_all native "native ($(findmnt -no FSTYPE -T "$tree" | head -1))" "$FSBENCH" "$tree"

shm=/dev/shm/fanstore-compare-$$
cp -r "$tree" "$shm"
measure_all tmpfs "tmpfs copy" "$FSBENCH" "$shm"
rm -rf "$shm"

mnt=$work/squashfs-mnt img=$work/compare.sqfs
if command -v squashfuse_ll >/dev/null && [ -c /dev/fuse ]; then
  [ -f "$img" ] || mksquashfs "$tree" "$img" -noappend -quiet >/dev/null
  mkdir -p "$mnt"
  if squashfuse_ll "$img" "$mnt" 2>"$work/err"; then
    measure_all squashfuse "squashfuse_ll" "$FSBENCH" "$mnt"
    fusermount3 -u "$mnt" 2>/dev/null || umount "$mnt"
  else
    echo "   squashfuse_ll: cannot mount ($(head -c 200 "$work/err")): skipped"
  fi
else
  echo "   squashfuse_ll or /dev/fuse not available: skipped"
fi

if [ -x "$FANRUN" ]; then
  packed=$work/compare-packed
  [ -f "$packed/manifest" ] || "$FANSTORE" pack -q "$tree" "$packed"
  measure_all fanstore "fanstore" "$FANRUN" --data "$packed" -- "$FSBENCH" "$tree"
else
  echo "   fanstore: fanrun is not built yet (the single-node runtime issue): skipped"
fi

{
  echo "{\"benchmark\": \"compare\", \"date\": \"$(date -u +%FT%TZ)\", \"cores\": $(nproc), \"files\": $files, \"mean_kb\": $mean_kb, \"seconds\": $seconds, \"rows\": ["
  (IFS=,; echo "${rows[*]}")
  echo "]}"
} >"$out"
/usr/bin/python3 bench/compare_report.py "$out"
