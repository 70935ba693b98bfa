#!/usr/bin/env bash
# What work outside the dataset pays under fanrun: the shapes unrelated work has (directory
# walks: find, du, os.walk; many opens of native files: tar c; Python start-up with
# imports; stat of missing files, as PATH lookups do; a chain of subprocesses), each run
# natively and under `fanrun` (a small dataset mounted elsewhere), alternating, with
# fanrun's own start-up (the median of `fanrun -- true`) taken out. Prints medians and
# ranges of the ratio fanrun/native per pair; writes bench/results/native_cost.json.
# Usage: bench/native_cost.sh [--pairs N] [--user NAME] [--per-call]   (default 7 pairs, as
#   the caller; --user runs both sides as that user, e.g. to see a process that cannot read
#   fanrun's skeleton directories; --per-call instead runs bench/call_cost.c natively and
#   under fanrun, N processes each alternating, and prints what the interception adds to
#   each shape of call: the fastest process's figure, in ns; bench/results/call_cost.json)
set -euo pipefail
cd "$(dirname "$0")/.."
pairs=7
user=""
per_call=0
while [ $# -gt 0 ]; do
  case $1 in
    --pairs) pairs=$2; shift 2 ;;
    --user) user=$2; shift 2 ;;
    --per-call) per_call=1; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "native_cost.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -x build/release/bin/fanrun ] || ci/build.sh release >/dev/null
work=$(mktemp -d /tmp/fanstore-native-cost-XXXXXX)
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src/d" && echo x >"$work/src/d/f"
build/release/bin/fanstore pack -q "$work/src" "$work/ds"
mkdir -m 1777 "$work/m"
if [ "$per_call" = 1 ]; then
  cc -O2 -o "$work/call_cost" bench/call_cost.c
  /usr/bin/python3 - "$pairs" "$work" "$(pwd)/build/release/bin/fanrun" <<'PY'
import json, os, subprocess, sys, time
pairs, work, fanrun = int(sys.argv[1]), sys.argv[2], sys.argv[3]
under = [fanrun, "--data", work + "/ds", "--mount", work + "/m/mnt", "--"]
def run(cmd):
    out = subprocess.run(cmd + [work + "/call_cost", "30"], stdout=subprocess.PIPE, text=True,
                         check=True).stdout
    return dict((k, float(v)) for k, v in (l.split("\t") for l in out.splitlines()))
nat, fan = {}, {}
for _ in range(pairs):  # alternating; per shape, the fastest process
    for side, cmd in ((nat, []), (fan, under)):
        for k, v in run(cmd).items():
            side[k] = min(side.get(k, v), v)
print("per call, ns over getppid (%.0f ns natively); fastest of %d processes each" % (
    nat["getppid ns"], pairs))
print("  %-32s %8s %8s %8s" % ("call", "native", "fanrun", "added"))
rows = {}
for k in nat:
    if k in ("getppid ns", "getppid (baseline)"):
        continue
    rows[k] = {"native_ns": nat[k], "fanrun_ns": fan[k], "added_ns": fan[k] - nat[k]}
    print("  %-32s %8.1f %8.1f %8.1f" % (k, nat[k], fan[k], fan[k] - nat[k]))
os.makedirs("bench/results", exist_ok=True)
json.dump({"benchmark": "call_cost", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "processes": pairs, "getppid_ns": nat["getppid ns"], "calls": rows},
          open("bench/results/call_cost.json", "w"), indent=1)
print("wrote bench/results/call_cost.json")
PY
  exit
fi
/usr/bin/python3 - "$pairs" "$work" "$user" "$(pwd)/build/release/bin/fanrun" <<'PY'
import json, os, statistics, subprocess, sys, time
pairs, work, user, fanrun = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
import pwd
prefix = (["setpriv", "--reuid=" + user, "--regid=%d" % pwd.getpwnam(user).pw_gid, "--init-groups"]
          if user else [])
under = [fanrun, "--data", work + "/ds", "--mount", work + "/m/mnt", "--"]
missing = "import os\nfor i in range(200000):\n    try: os.stat('/usr/bin/no-such-%d' % (i % 50))\n    except OSError: pass"
workloads = {
    "find /usr -type f": ["find", "/usr", "-type", "f"],
    "du -s /usr/share": ["du", "-s", "/usr/share"],
    "tar c /usr/include": ["tar", "cf", "-", "/usr/include"],
    "os.walk /usr/lib": ["/usr/bin/python3", "-c", "import os\nfor _ in os.walk('/usr/lib'): pass"],
    "python3 start-up with imports": ["/usr/bin/python3", "-c",
        "import json, decimal, email.parser, http.client, xml.dom.minidom, argparse, logging, csv, sqlite3"],
    "stat of missing files (200 k)": ["/usr/bin/python3", "-c", missing],
    "subprocess chain (50 x sh -c true)": ["/usr/bin/python3", "-c",
        "import subprocess\nfor _ in range(50): subprocess.run(['sh', '-c', 'true'])"],
}

def run(cmd):
    t0 = time.perf_counter()
    r = subprocess.run(prefix + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    t = time.perf_counter() - t0
    # (find and du may meet unreadable directories as another user: exit 1, same work)
    if r.returncode not in (0, 1) or (r.returncode == 1 and cmd[0] not in ("find", "du") and under[0] not in cmd):
        sys.exit("native_cost.sh: %s failed (exit %d): %s" % (" ".join(cmd), r.returncode, r.stderr[-300:]))
    return t

startup = statistics.median(run(under + ["true"]) for _ in range(9))
print("fanrun's own start-up (median of 9 `fanrun -- true`): %.1f ms, taken out below" % (startup * 1e3))
print("%d alternating pairs each; ratio = (fanrun - start-up) / native%s" % (pairs, " as " + user if user else ""))
results = {}
for name, cmd in workloads.items():
    run(cmd); run(under + cmd)  # warm the page cache and the plan cache
    ratios, nat, fan = [], [], []
    for _ in range(pairs):
        a = run(cmd)
        b = run(under + cmd) - startup
        nat.append(a); fan.append(b); ratios.append(b / a)
    m = statistics.median(ratios)
    results[name] = {"native_s_median": statistics.median(nat), "fanrun_s_median": statistics.median(fan),
                     "ratio_median": m, "ratio_min": min(ratios), "ratio_max": max(ratios)}
    print("  %-36s native %8.1f ms  fanrun %8.1f ms  ratio %.3f (%.3f-%.3f)" % (
        name, statistics.median(nat) * 1e3, statistics.median(fan) * 1e3, m, min(ratios), max(ratios)))
os.makedirs("bench/results", exist_ok=True)
out = "bench/results/native_cost%s.json" % ("-" + user if user else "")
json.dump({"benchmark": "native_cost", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "pairs": pairs, "user": user or None, "fanrun_startup_s": startup, "workloads": results},
          open(out, "w"), indent=1)
print("wrote " + out)
PY
