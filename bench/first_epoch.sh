#!/usr/bin/env bash
# The first epoch on a shared file system against its floor: one-epoch jobs (every file once,
# in a random order, by 1 and by 2 threads of fsbench and of Python, bench/pfs_epoch.py;
# start-up included) through one-node fanrun with DATA on MooseFS (started here:
# bench/mfs_lib.sh), beside the floor, the same packed bytes read once by a new client
# four partitions at a time (`xargs -P 4 cat`). With --before FANRUN, that build's fanrun
# takes its turn in every round too. Each job gets a new MooseFS client and a dropped page
# cache; the targets alternate within each round. Prints every job and writes
# bench/results/first_epoch.json.
# Usage: bench/first_epoch.sh [--files N] [--partitions P] [--rounds R] [--before FANRUN]
#        (root; default 2,500 files of ~80 KB in 4 partitions, 4 rounds)
set -euo pipefail
cd "$(dirname "$0")/.."
files=2500 partitions=4 rounds=4 before=""
while [ $# -gt 0 ]; do
  case $1 in
    --files) files=$2; shift 2 ;;
    --partitions) partitions=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --before) before=$(readlink -f "$2"); shift 2 ;;
    *) echo "usage: bench/first_epoch.sh [--files N] [--partitions P] [--rounds R] [--before FANRUN]" >&2
       exit 2 ;;
  esac
done
[ -x build/release/bin/fanrun ] || { ci/install-deps.sh && ci/build.sh release >/dev/null; }
[ "$(id -u)" = 0 ] || { echo "first_epoch.sh: needs root (network namespace, FUSE mount, drop_caches)" >&2; exit 2; }
if ! command -v mfsmaster >/dev/null || ! command -v mfsmount >/dev/null; then
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q moosefs-master moosefs-chunkserver \
    moosefs-client moosefs-cli >/dev/null
fi
work=$(mktemp -d /tmp/fanstore-first-XXXXXX)
chmod 755 "$work"
MFS_DIR=$work/mfs
MFS_MNT=$work/mnt
. bench/mfs_lib.sh
trap 'for m in "$work"/c*; do umount -l "$m" 2>/dev/null || true; done; mfs_stop; rm -rf --one-file-system "$work"' EXIT
mfs_start || { echo "first_epoch.sh: MooseFS did not start" >&2; exit 1; }
/usr/bin/python3 bench/gen_dataset.py imagenet "$work/src" --files "$files" --mean-kb 80 >/dev/null
build/release/bin/fanstore pack -q --partitions "$partitions" "$work/src" "$MFS_MNT/packed"
echo "packed: $(du -sm "$MFS_MNT/packed" | cut -f1) MiB in $partitions partitions on MooseFS"
targets=(floor)
[ -z "$before" ] || targets+=(before-fsbench1 before-fsbench2 before-python1 before-python2)
targets+=(fanrun-fsbench1 fanrun-fsbench2 fanrun-python1 fanrun-python2)
out=$work/rows
: >"$out"
for r in $(seq "$rounds"); do
  for t in "${targets[@]}"; do
    c=$work/c$r$t
    mkdir -p "$c"
    mfsmount -H "$MFS_IP" "$c" >/dev/null 2>&1
    sync && echo 3 >/proc/sys/vm/drop_caches
    threads=${t: -1}
    case $t in
      *fsbench*) reader=(build/release/bin/fsbench --op read --epochs 1 --threads "$threads" -q "$work/ds") ;;
      *python*) reader=(/usr/bin/python3 bench/pfs_epoch.py "$work/ds" --threads "$threads") ;;
    esac
    case $t in
      floor) cmd=(sh -c "ls $c/packed/part-*.fsb | xargs -P 4 -n 1 cat >/dev/null") ;;
      before*) cmd=("$before" --data "$c/packed" --mount "$work/ds" -- "${reader[@]}") ;;
      fanrun*) cmd=(build/release/bin/fanrun --data "$c/packed" --mount "$work/ds" -- "${reader[@]}") ;;
    esac
    t0=$(date +%s.%N)
    "${cmd[@]}" >"$work/job.out" 2>&1 || { echo "first_epoch.sh: $t failed: $(tail -3 "$work/job.out")" >&2; exit 1; }
    t1=$(date +%s.%N)
    umount "$c" && rmdir "$c"
    echo "$r $t $(echo "$t1 - $t0" | bc)" | tee -a "$out"
  done
done
mkdir -p bench/results
# (a partition count other than 4 has a file of its own: first_epoch_p1.json, ...)
result=bench/results/first_epoch$([ "$partitions" = 4 ] || echo "_p$partitions").json
/usr/bin/python3 - "$out" "$files" "$rounds" "${before:-}" "$partitions" "$result" <<'PY'
import json, statistics, sys, time
rows = [l.split() for l in open(sys.argv[1])]
floor = {r: float(s) for r, t, s in rows if t == "floor"}
out = {}
for r, t, s in rows:
    if t != "floor":
        out.setdefault(t, []).append({"round": int(r), "wall_s": float(s), "floor_s": floor[r], "x_floor": float(s) / floor[r]})
for t, v in out.items():
    x = [e["x_floor"] for e in v]
    print("%-16s wall median %.2f s, x floor median %.2f (rounds: %s)" % (
        t, statistics.median(e["wall_s"] for e in v), statistics.median(x), " ".join("%.2f" % e for e in x)))
json.dump({"benchmark": "first_epoch", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "files": int(sys.argv[2]), "partitions": int(sys.argv[5]), "rounds": int(sys.argv[3]),
           "before": sys.argv[4] or None, "floor_s": list(floor.values()), "jobs": out},
          open(sys.argv[6], "w"), indent=1)
print("wrote " + sys.argv[6])
PY
