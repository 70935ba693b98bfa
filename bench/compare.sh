#!/usr/bin/env bash
# Peer comparison: on the same generated ImageNet-like tree, in one run, fsbench measures
#   native   the tree on the local disk (warm page cache, and cold where caches can be dropped)
#   tmpfs    a copy in /dev/shm
#   squashfuse_ll  a squashfs image (mksquashfs, gzip) of the tree mounted with squashfuse_ll
#                  (skipped with a message where FUSE is not available)
#   fanstore the packed tree under `fanrun --no-stage`, served in place from the page cache
#   fanstore --stage  the same staged on /dev/shm (warm rows only): what fanrun does by
#            default with DATA on a local disk where the node makes shmem huge pages
#            (docs/guide.md)
# and prints files/s with the ratio to native: first the pattern training has (one epoch,
# every file once, by 2 new processes as DataLoader workers, page cache warm and dropped),
# then one new process's first pass, re-reads for --seconds in one process with 1 and 2
# threads, and stat. Every configuration runs --rounds times (default 5), the targets taking turns within each
# configuration, so that a ratio compares runs seconds apart (this VM's speed drifts by a
# third within minutes); the report gives the median of the rounds and each round's ratio.
# Writes bench/results/compare.json and, with gnuplot, bench/results/compare.png.
# With --states, only the training pattern's warm epoch, in the states the page cache can
# hold FanStore's data in: native; DATA's blobs read by `cat` after the cache was dropped,
# and read by fanrun's own cold epoch after the cache was dropped, each through fanrun as
# it chooses (a copy in /dev/shm in huge pages where the node makes them, measured once the
# copy has landed) and with --no-stage (DATA's page cache as it is); staged (--stage), once
# the copy has landed. Each state is made again before each of its rounds.
# With --jobs, only short jobs timed from CMD's first instant to its end (fanrun's start-up
# before CMD left out, the copy to /dev/shm and anything else fanrun does while CMD runs
# counted): one epoch and three epochs of the training pattern, natively, under fanrun as
# it chooses and under `fanrun --no-stage`, with the tree and DATA's blobs page-cached
# (warm) and with the page cache dropped before each job (cold), the targets alternating
# within each round. The report gives each median and fanrun's against the better of
# native and --no-stage.
# --bin DIR takes fsbench, fanstore and fanrun from DIR (an unpacked bundle's bin/, e.g. the
# aarch64 one on a Grace node: docs/bundle.md) instead of building build/release here.
# Usage: bench/compare.sh [--files N] [--mean-kb K] [--seconds S] [--rounds R] [--work DIR]
#                         [--states | --jobs] [--bin DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
files=22000 mean_kb=85 seconds=2 rounds=5 work=bench/work states=0 jobs=0 bin=
while [ $# -gt 0 ]; do
  case $1 in
    --files) files=$2; shift 2 ;;
    --mean-kb) mean_kb=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --states) states=1; shift ;;
    --jobs) jobs=1; shift ;;
    --bin) bin=$(cd "${2:?--bin needs a directory}" && pwd); shift 2 ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "compare.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case $rounds in ''|*[!0-9]*|0) echo "compare.sh: --rounds $rounds: not a positive whole number" >&2; exit 2 ;; esac
if [ -n "$bin" ]; then
  FSBENCH=$bin/fsbench FANSTORE=$bin/fanstore FANRUN=$bin/fanrun
  for t in "$FSBENCH" "$FANSTORE" "$FANRUN"; do
    [ -x "$t" ] || { echo "compare.sh: --bin: no $t" >&2; exit 2; }
  done
else
  FSBENCH=$PWD/build/release/bin/fsbench FANSTORE=$PWD/build/release/bin/fanstore FANRUN=$PWD/build/release/bin/fanrun
  [ -x "$FSBENCH" ] || ci/build.sh release >/dev/null
fi
mkdir -p "$work" bench/results
work=$(cd "$work" && pwd)
tree=$work/compare-$files-$mean_kb
[ -d "$tree" ] || bench/gen_dataset.py imagenet "$tree" --files "$files" --classes 100 --mean-kb "$mean_kb"
out=bench/results/compare.json
[ $states = 1 ] && out=bench/results/compare_states.json
[ $jobs = 1 ] && out=bench/results/compare_jobs.json
rows=()
can_drop=0
if (sync && echo 3 >/proc/sys/vm/drop_caches) 2>/dev/null; then can_drop=1; fi

run() {  # run ROUND TARGET LABEL OP THREADS CACHE -- CMD-PREFIX... PATH
  local round=$1 target=$2 label=$3 op=$4 threads=$5 cache=$6; shift 7
  # warm: one untimed pass, then epochs for $seconds (short runs of a fast target are all
  # noise); cold: caches dropped, one timed epoch.
  local extra=(--warmup --duration "$seconds")
  # A stat served from memory takes ~200 ns: two clock reads around each would be a tenth of
  # it, so stat latencies are sampled (every target alike); reads are all timed.
  [ "$op" = stat ] && extra+=(--latency-every 16)
  [ "$cache" = cold ] && extra=(--drop-caches --epochs 1)
  [ "$cache" = fresh ] && extra=(--epochs 1)
  # The training pattern: every file once per epoch, by THREADS new processes of one
  # thread each (DataLoader workers started for the epoch), over a warm page cache (3
  # epochs, each by new processes: one lasts ~0.2 s, too short to time alone) or a dropped
  # one (one epoch).
  [ "$cache" = epoch ] && extra=(--warmup --epochs 3 --fresh-processes --processes "$threads")
  [ "$cache" = epoch-cold ] && extra=(--drop-caches --epochs 1 --fresh-processes --processes "$threads")
  local shown=$threads  # (epoch rows: the processes; each runs one thread)
  case $cache in epoch*) threads=1 ;; esac
  local json
  if ! json=$("$@" --op "$op" --threads "$threads" "${extra[@]}" --json 2>"$work/err"); then
    echo "compare.sh: $label $op failed: $(head -c 300 "$work/err")" >&2
    return 0
  fi
  rows+=("{\"round\": $round, \"target\": \"$target\", \"label\": \"$label\", \"op\": \"$op\", \"threads\": $shown, \"cache\": \"$cache\", \"result\": $json}")
  local rate
  rate=$(echo "$json" | /usr/bin/python3 -c 'import json,sys; print("%.0f" % json.load(sys.stdin)["items_per_s"])')
  printf '  %d  %-18s %-10s %-10s %d  %10s files/s\n' "$round" "$label" "$op" "$cache" "$shown" "$rate"
}

echo "== $tree: $(find "$tree" -type f | wc -l) files, $(du -sh --apparent-size "$tree" | cut -f1)"
[ $can_drop = 1 ] || echo "   (cannot drop the page cache here: cold runs skipped)"

# The targets, as TARGET, LABEL, then the command prefix and the tree, separated by tabs
targets=("native	native ($(findmnt -no FSTYPE -T "$tree" | head -1))	$FSBENCH	$tree")
shm=/dev/shm/fanstore-compare-$$
mnt=$work/squashfs-mnt img=$work/compare.sqfs
mounted=0
cleanup() {
  rm -rf "$shm"
  if [ $mounted = 1 ]; then fusermount3 -u "$mnt" 2>/dev/null || umount "$mnt"; fi
}
trap cleanup EXIT
# (--jobs compares against native and --no-stage only)
[ $jobs = 1 ] || cp -r "$tree" "$shm"
[ $jobs = 1 ] || targets+=("tmpfs	tmpfs copy	$FSBENCH	$shm")
if [ $jobs = 1 ]; then
  :
elif command -v squashfuse_ll >/dev/null && [ -c /dev/fuse ]; then
  [ -f "$img" ] || mksquashfs "$tree" "$img" -noappend -quiet >/dev/null
  mkdir -p "$mnt"
  if squashfuse_ll "$img" "$mnt" 2>"$work/err"; then
    mounted=1
    targets+=("squashfuse	squashfuse_ll	$FSBENCH	$mnt")
  else
    echo "   squashfuse_ll: cannot mount ($(head -c 200 "$work/err")): skipped"
  fi
else
  echo "   squashfuse_ll or /dev/fuse not available: skipped"
fi
if [ -x "$FANRUN" ]; then
  packed=$work/compare-packed
  drop_format_1 "$packed"
  [ -f "$packed/manifest" ] || "$FANSTORE" pack -q "$tree" "$packed"
  targets+=("fanstore	fanstore	$FANRUN	--no-stage	--data	$packed	--	$FSBENCH	$tree")
  # The same staged on /dev/shm (--stage: copied, in huge pages), measured once the copy
  # is done (its staging-from file gone; a failed copy leaves it, so at most 60 s); warm
  # rows only.
  wait_staged='i=0; while [ -e "$(dirname "$FANSTORE_IMAGE")/staging-from" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; exec "$@"'
  targets+=("fanstore-staged	fanstore --stage	$FANRUN	--stage	--data	$packed	--	sh	-c	$wait_staged	sh	$FSBENCH	$tree")
else
  echo "   fanstore: fanrun is not built yet (the single-node runtime issue): skipped"
fi

# The states of --states: each made, then the warm epoch measured in it.
state_rows() {  # state_rows ROUND
  local round=$1 w
  IFS=$'\t' read -r -a w <<<"${targets[0]}"
  run "$round" native "${w[1]}" read 2 epoch -- "$FSBENCH" "$tree"
  [ $can_drop = 1 ] || { echo "   (cannot drop the page cache here: the blob states are skipped)"; return; }
  local how label
  for how in cat own; do
    for label in "" --no-stage; do
      sync && echo 3 >/proc/sys/vm/drop_caches
      if [ $how = cat ]; then
        cat "$packed"/part-*.fsb >/dev/null
      else
        "$FANRUN" --no-stage --data "$packed" -- "$FSBENCH" --op read --epochs 1 --fresh-processes --processes 2 "$tree" >/dev/null 2>&1
      fi
      if [ -z "$label" ]; then
        run "$round" "fanstore-$how" "fanstore, blobs by $how" read 2 epoch -- "$FANRUN" --data "$packed" -- sh -c "$wait_staged" sh "$FSBENCH" "$tree"
      else
        run "$round" "fanstore-$how-in-place" "fanstore --no-stage, by $how" read 2 epoch -- "$FANRUN" --no-stage --data "$packed" -- "$FSBENCH" "$tree"
      fi
    done
  done
  IFS=$'\t' read -r -a w <<<"${targets[-1]}"
  [ "${w[0]}" = fanstore-staged ] && run "$round" "${w[0]}" "${w[1]}" read 2 epoch -- "${w[@]:2}"
}
if [ $states = 1 ]; then
  [ -n "${packed:-}" ] || { echo "compare.sh: --states needs fanrun built" >&2; exit 1; }
  for round in $(seq "$rounds"); do state_rows "$round"; done
  {
    echo "{\"benchmark\": \"compare-states\", \"date\": \"$(date -u +%FT%TZ)\", \"cores\": $(nproc), \"files\": $files, \"mean_kb\": $mean_kb, \"seconds\": $seconds, \"rounds\": $rounds, \"thp\": \"$(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)\", \"shmem_thp\": \"$(cat /sys/kernel/mm/transparent_hugepage/shmem_enabled 2>/dev/null)\", \"rows\": ["
    (IFS=,; echo "${rows[*]}")
    echo "]}"
  } >"$out"
  /usr/bin/python3 bench/compare_report.py "$out"
  exit 0
fi

# --jobs: each job's CMD times itself, from its first instant to its end, in microseconds.
timed='t0=$(date +%s%N); "$@" >/dev/null || exit 1; t1=$(date +%s%N); echo $(((t1 - t0) / 1000))'
job_row() {  # job_row ROUND TARGET CACHE EPOCHS -- CMD-PREFIX...
  local round=$1 target=$2 cache=$3 epochs=$4 us
  shift 5
  if [ "$cache" = cold ]; then sync && echo 3 >/proc/sys/vm/drop_caches; fi
  if ! us=$("$@" sh -c "$timed" sh "$FSBENCH" --op read --epochs "$epochs" --fresh-processes \
    --processes 2 "$tree" 2>"$work/err"); then
    echo "compare.sh: $target $cache $epochs epochs failed: $(head -c 300 "$work/err")" >&2
    return 0
  fi
  local secs
  secs=$(awk -v us="$us" 'BEGIN { printf "%.6f", us / 1e6 }')
  rows+=("{\"round\": $round, \"target\": \"$target\", \"cache\": \"$cache\", \"epochs\": $epochs, \"seconds\": $secs}")
  printf '  %d  %-18s %-5s %d epoch(s)  %8.3f s\n' "$round" "$target" "$cache" "$epochs" "$secs"
}
if [ $jobs = 1 ]; then
  [ -n "${packed:-}" ] || { echo "compare.sh: --jobs needs fanrun built" >&2; exit 1; }
  caches=(warm)
  [ $can_drop = 1 ] && caches+=(cold)
  for round in $(seq "$rounds"); do
    for cache in "${caches[@]}"; do
      for epochs in 1 3; do
        # (warm: the tree and the blobs in the page cache, made so again before each job)
        for target in native fanstore fanstore-no-stage; do
          if [ "$cache" = warm ]; then
            find "$tree" -type f -exec cat {} + >/dev/null
            cat "$packed"/part-*.fsb >/dev/null
          fi
          case $target in
            native) job_row "$round" native "$cache" "$epochs" -- ;;
            fanstore) job_row "$round" fanstore "$cache" "$epochs" -- "$FANRUN" --data "$packed" -- ;;
            *) job_row "$round" "$target" "$cache" "$epochs" -- "$FANRUN" --no-stage --data "$packed" -- ;;
          esac
        done
      done
    done
  done
  {
    echo "{\"benchmark\": \"compare-jobs\", \"date\": \"$(date -u +%FT%TZ)\", \"cores\": $(nproc), \"cpu\": \"$(sed -n 's/^model name.*: //p' /proc/cpuinfo | head -1)\", \"files\": $files, \"mean_kb\": $mean_kb, \"rounds\": $rounds, \"rows\": ["
    (IFS=,; echo "${rows[*]}")
    echo "]}"
  } >"$out"
  /usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys
d = json.load(open(sys.argv[1]))
by = {}
for r in d["rows"]:
    by.setdefault((r["cache"], r["epochs"], r["target"]), []).append(r["seconds"])
print("== jobs timed from CMD's first instant, median of %d rounds (%s, %d cores)" % (d["rounds"], d["cpu"], d["cores"]))
print("   %-5s %-7s %10s %10s %12s %14s" % ("cache", "epochs", "native", "fanstore", "--no-stage", "best/fanstore"))
for cache in ("warm", "cold"):
    for epochs in (1, 3):
        m = {t: statistics.median(by[(cache, epochs, t)]) for t in ("native", "fanstore", "fanstore-no-stage") if (cache, epochs, t) in by}
        if len(m) < 3:
            continue
        best = min(m["native"], m["fanstore-no-stage"])
        print("   %-5s %-7d %9.3fs %9.3fs %11.3fs %13.2fx" % (cache, epochs, m["native"], m["fanstore"], m["fanstore-no-stage"], best / m["fanstore"]))
print("   (best/fanstore: the time of the better of native and --no-stage over fanrun's own; 1.00x or more is no slower)")
PY
  exit 0
fi

# Configurations: OP THREADS CACHE, the training pattern first. "epoch": one epoch by
# THREADS new processes over page-cached data (DataLoader workers started for the epoch),
# "epoch-cold" the same with the page cache dropped; "fresh" is one new process's first
# pass; warm runs re-read in one process for --seconds.
# (the cold rows last: they leave the page cache empty for whatever runs next)
configs=("read 2 epoch" "read 1 fresh" "read 1 warm" "read 2 warm" "stat 1 warm" "stat 2 warm")
[ $can_drop = 1 ] && configs+=("read 2 epoch-cold" "read 2 cold")
for round in $(seq "$rounds"); do
  for c in "${configs[@]}"; do
    read -r op t cache <<<"$c"
    for spec in "${targets[@]}"; do
      IFS=$'\t' read -r -a w <<<"$spec"
      case ${w[0]}:$cache in fanstore-staged:*cold) continue ;; esac
      run "$round" "${w[0]}" "${w[1]}" "$op" "$t" "$cache" -- "${w[@]:2}"
    done
  done
done

{
  echo "{\"benchmark\": \"compare\", \"date\": \"$(date -u +%FT%TZ)\", \"cores\": $(nproc), \"files\": $files, \"mean_kb\": $mean_kb, \"seconds\": $seconds, \"rounds\": $rounds, \"rows\": ["
  (IFS=,; echo "${rows[*]}")
  echo "]}"
} >"$out"
/usr/bin/python3 bench/compare_report.py "$out"
