#!/usr/bin/env bash
# FanStore against the shared file system it exists for: MooseFS (a metadata server, as
# Lustre's MDS) started here, an ImageNet-like tree of real JPEGs generated and packed on
# it, and jobs alternating native (the tree on the MooseFS mount) and one-node `fanrun`
# (DATA on MooseFS, copied to /dev/shm while the command runs). Each job gets a new
# MooseFS client (its own mount, no cache) and a dropped page cache. The jobs: one cold
# epoch read by fsbench with 1 and 2 threads (start-up included); 3 epochs,
# every file once per epoch in a random order, with 1 and 2 Python reader threads (cold;
# the first over fanrun's fresh copy; warm); a warm epoch read by fsbench (after an
# untimed one); a PyTorch DataLoader epoch (bench/train_epoch.py); two-rank jobs
# (mpiexec -n 2, both ranks staging from MooseFS before CMD, and with --stage while it
# runs): every rank reading every file, and a training loop (each rank its shard, batches of
# 32 followed by a 15 ms step: bench/pfs_epoch.py --step-ms); and one epoch while another client
# stats other files in a loop. Per job: wall time with start-up, files/s, the time to the
# first read, the master's operations (mfscli -SMO) and CPU time, the bytes the client
# pulled from the daemons (the veth's counters), and the CPU-seconds of the job, the client
# and the chunkserver: here the daemons share the job's cores, so their sum over the cores
# is a least wall time the job can take (its `bound`, beside the floor's own). Right before
# each job, the floor: the packed dataset's bytes read once by a new client, four
# partitions at a time, each in order (`xargs -P 4 cat`, as fanrun's copy reads them), and
# the job's wall time as a multiple of it; a cold fsbench epoch, the DataLoader epoch and the
# two-rank jobs also against the floor plus the same job run again on the warm page cache
# (a reader in random order that does nothing else gets its last files when the crossing
# ends). JSON in bench/results/pfs.json, a plot in bench/results/pfs.png. Installs MooseFS
# from Debian's packages if missing.
# Usage: bench/pfs.sh [--files N] [--rounds R]   (root; default 4,000 files of ~100 KB, 3 rounds)
set -euo pipefail
cd "$(dirname "$0")/.."
files=4000
rounds=3
while [ $# -gt 0 ]; do
  case $1 in
    --files) files=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    -h|--help) sed -n '2,/^# Usage/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "pfs.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "pfs.sh: needs root (network namespace, FUSE mount, drop_caches)" >&2; exit 2; }
if ! command -v mfsmaster >/dev/null || ! command -v mfsmount >/dev/null || ! command -v mfscli >/dev/null; then
  echo "pfs.sh: installing MooseFS from Debian's packages"
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q moosefs-master moosefs-chunkserver \
    moosefs-client moosefs-cli >/dev/null
fi
[ -x build/release/bin/fanrun ] || { ci/install-deps.sh && ci/build.sh release >/dev/null; }
work=$(mktemp -d /tmp/fanstore-pfs-XXXXXX)
chmod 755 "$work"  # (the daemons run as user mfs)
MFS_DIR=$work/mfs
MFS_MNT=$work/mnt
. bench/mfs_lib.sh
trap 'for m in "$work"/m[0-9]*; do umount -l "$m" 2>/dev/null || true; done; mfs_stop; rm -rf "$work"' EXIT
mfs_start || { echo "pfs.sh: MooseFS did not start: $(cat "$MFS_DIR"/*.log | tail -n 3)" >&2; exit 1; }
echo "MooseFS up (master $MFS_IP, mount $MFS_MNT); generating $files files"
/usr/bin/python3 bench/gen_dataset.py imagenet "$MFS_MNT/imagenet" --files "$files" --mean-kb 100 --real-jpeg >/dev/null
build/release/bin/fanstore pack -q "$MFS_MNT/imagenet" "$MFS_MNT/packed"
FR=$(pwd)/build/release/bin/fanrun
mkdir -p "$MFS_MNT/other"  # the interfering client's files
for i in $(seq 2000); do : >"$MFS_MNT/other/f$i"; done
MFS_DIR=$MFS_DIR MFS_VETH=fsm$$h /usr/bin/python3 - "$rounds" "$MFS_MNT" "$FR" "$work" <<'PY'
import json, os, statistics, subprocess, sys, threading, time
rounds, mnt, fanrun, work = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
ip, veth, mfs_dir = "10.231.0.2", os.environ["MFS_VETH"], os.environ["MFS_DIR"]
master_pid = subprocess.run(["pgrep", "-f", "mfsmaster -c " + mfs_dir], capture_output=True, text=True).stdout.split()[0]
chunkserver_pids = subprocess.run(["pgrep", "-f", "mfschunkserver -c " + mfs_dir], capture_output=True, text=True).stdout.split()
hz = os.sysconf("SC_CLK_TCK")
jobs = [0]
def fresh_mount():  # a new client per job (no cache of its own), its session told by its path
    jobs[0] += 1
    m = "%s/m%d" % (work, jobs[0])
    os.makedirs(m)
    subprocess.run(["sync"])
    open("/proc/sys/vm/drop_caches", "w").write("3\n")
    subprocess.run(["mfsmount", "-H", ip, m], check=True, capture_output=True)
    return m
def unmount(m):  # and wait for its client to exit: reads it still had in flight would
    # otherwise count as the next job's bytes
    pids = subprocess.run(["pgrep", "-f", "mfsmount.*" + m + r"\b"], capture_output=True,
                          text=True).stdout.split()
    subprocess.run(["umount", "-l", m])
    for _ in range(200):
        if not any(os.path.exists("/proc/" + p) for p in pids): break
        time.sleep(0.05)
    else:
        print("pfs.sh: the client of %s still runs 10 s after its unmount: the next job's "
              "bytes may hold some of its reads" % m, file=sys.stderr)
def counters(m):
    out = subprocess.run(["mfscli", "-H", ip, "-SMO", "-m", "1"], capture_output=True, text=True).stdout
    ops = sum(int(f[-1]) for f in (l.split("\t") for l in out.splitlines())
              if f[0].startswith("active mounts, operations:") and f[2] == m)
    rx = int(open("/sys/class/net/%s/statistics/rx_bytes" % veth).read())
    client = subprocess.run(["pgrep", "-f", r"mfsmount \(mounted on: %s\)" % m], capture_output=True,
                            text=True).stdout.split()
    return ops, cpu_s([master_pid]), rx, cpu_s(client), cpu_s(chunkserver_pids)
def cpu_s(pids):  # user + system CPU-seconds of these processes so far
    t = 0
    for p in pids:
        try:
            f = open("/proc/%s/stat" % p).read().rsplit(")", 1)[1].split()
            t += int(f[11]) + int(f[12])
        except OSError:
            pass
    return t / hz
epoch = ["/usr/bin/python3", os.path.abspath("bench/pfs_epoch.py")]
def under(m):
    return [fanrun, "--data", m + "/packed", "--mount", work + "/ds", "--"]
other_mnt = fresh_mount()
class Stats(threading.Thread):  # another user's client, its own mount: stat of other files
    def __init__(self):
        super().__init__(daemon=True); self.n = 0; self.stop = False
    def run(self):
        names = [other_mnt + "/other/f%d" % i for i in range(1, 2001)]
        while not self.stop:
            for p in names:
                os.stat(p); self.n += 1
                if self.stop: break
def job(make_cmd, parse=True, interfere=False, again=False):
    m = fresh_mount()
    c0 = counters(m)
    st = Stats() if interfere else None
    if st: st.start()
    t0, cpu0 = time.perf_counter(), os.times()
    cmd = make_cmd(m)
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall, cpu1 = time.perf_counter() - t0, os.times()
    if st: st.stop = True; st.join()
    c1 = counters(m)
    if again and r.returncode == 0:  # the same job once more, its bytes in the page cache now
        t1 = time.perf_counter()
        r2 = subprocess.run(cmd, capture_output=True, text=True)
        warm_job_s = time.perf_counter() - t1
        if r2.returncode != 0:
            r = r2
    unmount(m)
    if r.returncode != 0:
        sys.exit("pfs.sh: %s failed: %s" % (" ".join(cmd), r.stderr[-500:]))
    out = {"wall_s": wall, "master_ops": c1[0] - c0[0], "master_cpu_s": c1[1] - c0[1],
           "mfs_bytes": c1[2] - c0[2], "stderr": r.stderr.strip().splitlines()[-3:],
           # (CPU-seconds of the job's processes, the client and the chunkserver: where both
           # daemons share the job's cores, their sum over the cores bounds its wall time)
           "job_cpu_s": cpu1.children_user + cpu1.children_system - cpu0.children_user - cpu0.children_system,
           "client_cpu_s": c1[3] - c0[3], "chunkserver_cpu_s": c1[4] - c0[4]}
    out["cpu_bound_s"] = (out["job_cpu_s"] + out["client_cpu_s"] + out["chunkserver_cpu_s"] +
                          out["master_cpu_s"]) / os.cpu_count()
    if st: out["other_stats_per_s"] = st.n / wall
    if again: out["warm_job_s"] = warm_job_s
    if parse == "fsbench":
        out["warm_files_per_s"] = json.loads(r.stdout)["items_per_s"]
    elif parse == "fsbench-cold":
        out["cold_files_per_s"] = json.loads(r.stdout)["items_per_s"]
    elif parse:
        e = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
        out.update({"cold_files_per_s": e[0]["files_per_s"], "first_read_s": e[0]["first_read_s"],
                    "cold_epoch_s": e[0]["seconds"]})
        if len(e) > 2:  # (the second epoch is fanrun's first over its fresh copy)
            out.update({"second_files_per_s": e[1]["files_per_s"], "warm_files_per_s": e[2]["files_per_s"],
                        "staging_wait_s": e[1]["staging_wait_s"]})
    return out
def summarize(rs):
    row = {"rounds": len(rs)}
    for k in rs[0]:
        if isinstance(rs[0][k], (int, float)):
            v = [r[k] for r in rs]
            row[k] = {"median": statistics.median(v), "min": min(v), "max": max(v)}
    row["stderr_example"] = rs[0]["stderr"]
    return row
results = []
def floor_cmd(m):  # every packed byte across once, in order: the least a first epoch can take
    # (four streams at once, one partition each, as fanrun's copy reads: the faster floor)
    return ["sh", "-c", "ls %s/packed/part-*.fsb | xargs -P 4 -n 1 cat >/dev/null" % m]
def compare(name, native_cmd, fanrun_cmd, also=(), **kw):
    kinds = [("native", native_cmd), ("fanrun", fanrun_cmd)] + list(also)
    rs = {kind: [] for kind, _ in kinds}
    for _ in range(rounds):
        for kind, cmd in kinds:
            # (the floor right before each job: the VM's floors moved 0.48-0.68 s within a
            # round, and a native job between a floor and fanrun's took 4-11 s)
            f = job(floor_cmd, parse=False)
            floor = f["wall_s"]
            r = job(cmd, **kw)
            r["floor_s"], r["wall_to_floor"] = floor, r["wall_s"] / floor
            if "warm_job_s" in r:
                r["wall_to_floor_plus_warm"] = r["wall_s"] / (floor + r["warm_job_s"])
            r["floor_cpu_bound_s"] = f["cpu_bound_s"]
            rs[kind].append(r)
    for kind, _ in kinds:
        row = summarize(rs[kind]); row.update({"run": name, "reader": kind}); results.append(row)
        m = lambda k: row[k]["median"] if k in row else float("nan")
        print("%-28s %-14s wall %6.2f s (%.2fx the floor: %s)  CPU-s job %.2f client %.2f chunkserver %.2f, bound %.2f s (floor's %.2f)  cold %7.0f  warm %7.0f files/s  1st read %.3f s  master %6.0f ops %5.2f s cpu  %7.1f MB pulled%s" % (
            name, kind, m("wall_s"), m("wall_to_floor"),
            " ".join("%.2f/%.2f" % (r["wall_s"], r["floor_s"]) for r in rs[kind]),
            m("job_cpu_s"), m("client_cpu_s"), m("chunkserver_cpu_s"), m("cpu_bound_s"), m("floor_cpu_bound_s"),
            m("cold_files_per_s"), m("warm_files_per_s"), m("first_read_s"),
            m("master_ops"), m("master_cpu_s"), m("mfs_bytes") / 1e6,
            ("  other client %.0f stat/s" % m("other_stats_per_s")) if "other_stats_per_s" in row else ""), flush=True)
        if "warm_job_s" in row:  # (see the first-epoch jobs below)
            print("%-28s %-14s again warm %.2f s: %.2fx the floor plus that (%s)" % (
                name, kind, m("warm_job_s"), m("wall_to_floor_plus_warm"),
                " ".join("%.2f" % r["wall_to_floor_plus_warm"] for r in rs[kind])), flush=True)
idle = Stats(); idle.start(); time.sleep(3); idle.stop = True; idle.join()
idle_rate = idle.n / 3
print("another client's stat loop alone: %.0f stat/s" % idle_rate)
fsbench = os.path.join(os.path.dirname(fanrun), "fsbench")
# One cold epoch by C++ threads (no interpreter starting beside the copy), then the same job
# again on the warm page cache: a reader in random order that does nothing else waits for
# files as they land, its last ones at the end of the crossing, so its cold job takes about
# the floor plus that warm job at best.
for t in (1, 2):
    compare("first epoch, fsbench, %d thread%s" % (t, "s" if t > 1 else ""),
            lambda m: [fsbench, "--op", "read", "--epochs", "1", "--threads", str(t), "--json", "-q", m + "/imagenet"],
            lambda m: under(m) + [fsbench, "--op", "read", "--epochs", "1", "--threads", str(t), "--json", "-q", work + "/ds"],
            parse="fsbench-cold", again=True)
for t in (1, 2):
    compare("epochs, %d thread%s" % (t, "s" if t > 1 else ""),
            lambda m: epoch + [m + "/imagenet", "--threads", str(t), "--epochs", "3"],
            lambda m: under(m) + epoch + [work + "/ds", "--threads", str(t), "--epochs", "3", "--after-staging"])
def fsbench_warm(root, t):  # one warm epoch, after an untimed one (C++: no interpreter's ceiling)
    return (r'while [ -e "$(dirname "${FANSTORE_IMAGE:-/nonexistent/x}")/staging-from" ]; do sleep 0.05; done; '
            '%s --op read --warmup --epochs 1 --threads %d --json -q %s' % (fsbench, t, root))
for t in (1, 2):
    compare("warm epoch, fsbench, %d thread%s" % (t, "s" if t > 1 else ""),
            lambda m: ["sh", "-c", fsbench_warm(m + "/imagenet", t)],
            lambda m: under(m) + ["sh", "-c", fsbench_warm(work + "/ds", t)], parse="fsbench")
# (bench/train_epoch.py reads the tree with plain Python where torch is absent: that is not
# a DataLoader epoch, so the job is left out, and said)
if subprocess.run(["/usr/bin/python3", "-c", "import torch, torchvision"], capture_output=True).returncode == 0:
    compare("DataLoader epoch, 2 workers",
            lambda m: ["/usr/bin/python3", "bench/train_epoch.py", m + "/imagenet/train", "--workers", "2", "--json"],
            lambda m: under(m) + ["/usr/bin/python3", "bench/train_epoch.py", work + "/ds/train", "--workers", "2", "--json"],
            parse=False, again=True)
else:
    print("DataLoader epoch: left out: /usr/bin/python3 has no torch and torchvision "
          "(apt-get install python3-torch python3-torchvision)", flush=True)
# Two ranks: each copies its share before the exchange, or (--stage) while CMD runs. Every
# rank reads every file; then a training loop, each rank its shard with 15 ms steps.
def two(m, stage=False, args=("--threads", "1")):
    return ["mpiexec", "-n", "2"] + under(m)[:1] + (["--stage"] if stage else []) + under(m)[1:] + \
        epoch + [work + "/ds"] + list(args)
# Both ranks share this host's 2 cores, so each job's own work (every rank reading every file,
# half of them over MPI) is more than the floor: each is also run again warm, and its cold
# wall time set against the floor plus that (the crossing, then the job with nothing to
# fetch: what a job that overlaps nothing takes).
compare("2 ranks (mpiexec -n 2)",
        lambda m: ["mpiexec", "-n", "2"] + epoch + [m + "/imagenet", "--threads", "1"],
        lambda m: two(m), also=[("fanrun --stage", lambda m: two(m, True))], parse=False,
        again=True)
step = ("--threads", "2", "--shard", "--step-ms", "15")
compare("2 ranks, training loop",
        lambda m: ["mpiexec", "-n", "2", "env", "FANSTORE_NODES=2", "sh", "-c",
                   'FANSTORE_RANK=$PMI_RANK exec "$@"', "sh"] + epoch + [m + "/imagenet"] + list(step),
        lambda m: two(m, args=step), also=[("fanrun --stage", lambda m: two(m, True, step))],
        parse=False, again=True)
compare("epoch with another client", lambda m: epoch + [m + "/imagenet", "--threads", "2"],
        lambda m: under(m) + epoch + [work + "/ds", "--threads", "2"], interfere=True)
os.makedirs("bench/results", exist_ok=True)
json.dump({"benchmark": "pfs", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "file_system": "MooseFS 3.0: one master, one chunkserver (own network namespace), FUSE client, this host",
           "rounds": rounds, "other_client_alone_stats_per_s": idle_rate, "results": results},
          open("bench/results/pfs.json", "w"), indent=1)
with open(work + "/pfs.dat", "w") as f:
    for r in results:
        if r["run"].startswith("epochs"):
            f.write('"%s, %s thr" %f %f\n' % (r["reader"], r["run"].split(", ")[1].split()[0], r["cold_files_per_s"]["median"], r["warm_files_per_s"]["median"]))
print("wrote bench/results/pfs.json")
PY
if command -v gnuplot >/dev/null; then
  gnuplot <<GP && echo "wrote bench/results/pfs.png"
set terminal pngcairo size 800,450
set output "bench/results/pfs.png"
set title "Random-order epochs from MooseFS: native vs one-node fanrun (median files/s)"
set style data histograms
set style fill solid 0.8 border -1
set logscale y
set ylabel "files/s"
set key top left
plot "$work/pfs.dat" using 2:xtic(1) title "cold (page cache dropped)", "" using 3 title "warm"
GP
fi
