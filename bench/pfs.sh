#!/usr/bin/env bash
# FanStore against the shared file system it exists for: MooseFS (a metadata server, as
# Lustre's MDS) started here, an ImageNet-like tree generated and packed on it, and random-
# order epochs read natively from the MooseFS mount and through one-node `fanrun` (which
# copies DATA to /dev/shm while the command runs), alternating, cold (page cache dropped)
# then warm (a second epoch in the same process), with 1 and 2 reader threads. Reports wall
# time including start-up, files/s, the master's operations per run (mfscli -SMO) and the
# time to the first read. JSON in bench/results/pfs.json.
# Usage: bench/pfs.sh [--files N] [--rounds R]   (root; default 4,000 files of ~100 KB, 3 rounds)
set -euo pipefail
cd "$(dirname "$0")/.."
files=4000
rounds=3
while [ $# -gt 0 ]; do
  case $1 in
    --files) files=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "pfs.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "pfs.sh: needs root (network namespace, FUSE mount, drop_caches)" >&2; exit 2; }
command -v mfsmaster >/dev/null || { echo "pfs.sh: MooseFS missing: apt-get install moosefs-master moosefs-chunkserver moosefs-client moosefs-cli" >&2; exit 2; }
[ -x build/release/bin/fanrun ] || ci/build.sh release >/dev/null
work=$(mktemp -d /tmp/fanstore-pfs-XXXXXX)
chmod 755 "$work"  # (the daemons run as user mfs)
MFS_DIR=$work/mfs
MFS_MNT=$work/mnt
. bench/mfs_lib.sh
trap 'mfs_stop; rm -rf "$work"' EXIT
mfs_start || { echo "pfs.sh: MooseFS did not start: $(cat "$MFS_DIR"/*.log | tail -n 3)" >&2; exit 1; }
echo "MooseFS up (master $MFS_IP, mount $MFS_MNT); generating $files files"
/usr/bin/python3 bench/gen_dataset.py imagenet "$MFS_MNT/imagenet" --files "$files" --mean-kb 100 >/dev/null
build/release/bin/fanstore pack -q "$MFS_MNT/imagenet" "$MFS_MNT/packed"
FR=$(pwd)/build/release/bin/fanrun
/usr/bin/python3 - "$rounds" "$MFS_MNT" "$FR" "$work" <<'PY'
import json, os, statistics, subprocess, sys, time
rounds, mnt, fanrun, work = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
ip = "10.231.0.2"
def ops():
    out = subprocess.run(["mfscli", "-H", ip, "-SMO", "-m", "1"], capture_output=True, text=True).stdout
    return sum(int(l.split("\t")[-1]) for l in out.splitlines() if l.startswith("active mounts, operations:"))
def drop():
    subprocess.run(["sync"]); open("/proc/sys/vm/drop_caches", "w").write("3\n")
epoch = ["/usr/bin/python3", os.path.abspath("bench/pfs_epoch.py")]
def run(kind, threads):
    drop()
    o0 = ops()
    t0 = time.perf_counter()
    if kind == "native":
        cmd = epoch + [mnt + "/imagenet", "--threads", str(threads), "--epochs", "2"]
    else:
        cmd = [fanrun, "--data", mnt + "/packed", "--mount", work + "/ds", "--"] + epoch + [
            work + "/ds", "--threads", str(threads), "--epochs", "2"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit("pfs.sh: %s failed: %s" % (" ".join(cmd), r.stderr[-500:]))
    e = [json.loads(l) for l in r.stdout.splitlines()]
    return {"wall_s": wall, "cold_files_per_s": e[0]["files_per_s"], "cold_epoch_s": e[0]["seconds"],
            "warm_files_per_s": e[1]["files_per_s"], "first_read_s": e[0]["first_read_s"],
            "master_ops": ops() - o0, "stderr": r.stderr.strip().splitlines()}
res = {}
for threads in (1, 2):
    for kind in ("native", "fanrun"):
        res.setdefault((kind, threads), [])
    for _ in range(rounds):
        for kind in ("native", "fanrun"):
            res[(kind, threads)].append(run(kind, threads))
summary = []
print("%-8s %7s %10s %12s %12s %10s %10s" % ("reader", "threads", "wall s", "cold files/s", "warm files/s", "1st read s", "master ops"))
for (kind, threads), rs in res.items():
    med = lambda k: statistics.median(r[k] for r in rs)
    rng = lambda k: (min(r[k] for r in rs), max(r[k] for r in rs))
    row = {"reader": kind, "threads": threads, "rounds": len(rs)}
    for k in ("wall_s", "cold_files_per_s", "warm_files_per_s", "first_read_s", "master_ops"):
        row[k] = {"median": med(k), "min": rng(k)[0], "max": rng(k)[1]}
    summary.append(row)
    print("%-8s %7d %10.2f %12.0f %12.0f %10.3f %10.0f" % (kind, threads, med("wall_s"), med("cold_files_per_s"),
          med("warm_files_per_s"), med("first_read_s"), med("master_ops")))
for threads in (1, 2):
    n = {r["reader"]: r for r in summary if r["threads"] == threads}
    print("threads %d: wall fanrun/native %.2f; warm files/s %.1fx; master ops %.0fx fewer" % (
        threads, n["fanrun"]["wall_s"]["median"] / n["native"]["wall_s"]["median"],
        n["fanrun"]["warm_files_per_s"]["median"] / n["native"]["warm_files_per_s"]["median"],
        n["native"]["master_ops"]["median"] / max(1, n["fanrun"]["master_ops"]["median"])))
os.makedirs("bench/results", exist_ok=True)
json.dump({"benchmark": "pfs", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "file_system": "MooseFS 3.0 (one master, one chunkserver, FUSE client, this host)",
           "rounds": rounds, "results": summary,
           "fanrun_stderr_example": res[("fanrun", 1)][0]["stderr"]}, open("bench/results/pfs.json", "w"), indent=1)
print("wrote bench/results/pfs.json")
PY
