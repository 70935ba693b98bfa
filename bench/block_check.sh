#!/usr/bin/env bash
# What checking a large raw member costs a reader at random offsets (an LMDB or HDF5 file
# read by pages): one job's first 4 KiB pread at a random offset of a --mb MiB raw member,
# and its first 200 such reads, each job a new fanrun (so the node's marks start empty),
# page cache warm, served in place. Format 4 keeps a CRC32C per 1 MiB block, so a read
# checks the blocks it touches; a pack made before format 4 (--before FANSTORE: that
# build's fanstore packs the same tree) has one checksum, so the first read checks the
# whole member. Targets take turns within each round. Writes bench/results/block_check.json.
# Usage: bench/block_check.sh [--mb N] [--rounds R] [--before FANSTORE] [--work DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
mb=1024 rounds=5 before="" work=bench/work
while [ $# -gt 0 ]; do
  case $1 in
    --mb) mb=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --before) before=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    -h | --help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "block_check.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for n in "$mb" "$rounds"; do
  case $n in '' | *[!0-9]* | 0) echo "block_check.sh: '$n': not a positive whole number" >&2; exit 2 ;; esac
done
[ -z "$before" ] || [ -x "$before" ] || { echo "block_check.sh: --before $before: not an executable" >&2; exit 2; }
FANSTORE=$PWD/build/release/bin/fanstore FANRUN=$PWD/build/release/bin/fanrun
[ -x "$FANRUN" ] || ci/build.sh release >/dev/null
mkdir -p "$work/block-check/src" bench/results
w=$(cd "$work/block-check" && pwd)
[ "$(stat -c %s "$w/src/db.bin" 2>/dev/null || echo 0)" = $((mb << 20)) ] ||
  head -c $((mb << 20)) /dev/urandom >"$w/src/db.bin"
rm -rf "$w/format4" "$w/before"
"$FANSTORE" pack -q "$w/src" "$w/format4"
targets=(format4)
if [ -n "$before" ]; then "$before" pack -q "$w/src" "$w/before" && targets+=(before); fi
cat "$w"/*/part-*.fsb >/dev/null  # page cache warm
cat >"$w/probe.py" <<'PY'
import os, random, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
size = os.fstat(fd).st_size
rnd = random.Random(int(sys.argv[2]))
t0 = time.perf_counter()
os.pread(fd, 4096, rnd.randrange(size - 4096))
t1 = time.perf_counter()
for _ in range(199):
    os.pread(fd, 4096, rnd.randrange(size - 4096))
t2 = time.perf_counter()
print("%.3f %.3f" % ((t1 - t0) * 1e3, (t2 - t0) * 1e3))
PY
rows=()
for r in $(seq "$rounds"); do
  for t in "${targets[@]}"; do
    read -r first all < <(FANSTORE_QUIET=1 "$FANRUN" --data "$w/$t" --mount "$w/mnt" -- /usr/bin/python3 "$w/probe.py" "$w/mnt/db.bin" "$r")
    printf '  %d  %-8s first read %8.2f ms   200 reads %8.2f ms\n' "$r" "$t" "$first" "$all"
    rows+=("{\"round\": $r, \"target\": \"$t\", \"first_ms\": $first, \"reads200_ms\": $all}")
  done
done
{
  echo "{\"benchmark\": \"block_check\", \"date\": \"$(date -u +%FT%TZ)\", \"mb\": $mb, \"rounds\": $rounds, \"rows\": ["
  (IFS=,; echo "${rows[*]}")
  echo "]}"
} >bench/results/block_check.json
/usr/bin/python3 - bench/results/block_check.json <<'PY'
import json, statistics, sys
d = json.load(open(sys.argv[1]))
for t in sorted({r["target"] for r in d["rows"]}):
    rs = [r for r in d["rows"] if r["target"] == t]
    print("%-8s median first read %.2f ms, 200 reads %.2f ms (%d rounds)" % (
        t, statistics.median(r["first_ms"] for r in rs),
        statistics.median(r["reads200_ms"] for r in rs), len(rs)))
PY
