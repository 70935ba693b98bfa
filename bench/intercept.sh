#!/usr/bin/env bash
# The cost of interception, side by side in one run (the test hook library of
# tests/intercept stands in for the runtime):
#   ns per getpid(): bare (no preload); intercepted and passed to the kernel; handled by the
#   hook without the kernel; each with the default register save and with FANSTORE_XSAVE=1.
#   Slowdown of unrelated system-call-heavy workloads with the library preloaded, the hook
#   passing every call: `find /usr`, an import-heavy Python start-up, `tar c /usr/include`.
# Medians of alternating runs. Writes bench/results/intercept.json.
# Usage: bench/intercept.sh [--runs N]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=21
[ "${1:-}" = --runs ] && runs=$2
[ "${1:-}" = -h ] || [ "${1:-}" = --help ] && { sed -n '2,9p' "$0"; exit 0; }
[ -x build/release/tests/intercept/intercept_probe ] || ci/build.sh release >/dev/null
export FANSTORE_CACHE_DIR=$(mktemp -d /tmp/fanstore-bench-cache-XXXXXX)
trap 'rm -rf "$FANSTORE_CACHE_DIR"' EXIT
/usr/bin/python3 - "$runs" <<'PY'
import json, os, statistics, subprocess, sys, time
runs = int(sys.argv[1])
probe = "build/release/tests/intercept/intercept_probe"
lib = os.path.abspath("build/release/tests/intercept/libfanstore_testhook.so")

def env(**kw):
    e = dict(os.environ)
    e.update(kw)
    return e

def ns(e):
    return min(float(subprocess.check_output([probe, "time-getpid", "2000000"], env=e)) for _ in range(3))

rows = {}
print("ns per getpid() call (best of 3 x best of 5 rounds of 2M calls):")
rows["bare"] = ns(env())
for mode, label in (("0", "registers"), ("1", "XSAVEC")):
    rows["pass/" + label] = ns(env(LD_PRELOAD=lib, FANSTORE_TESTHOOK="pass", FANSTORE_XSAVE=mode))
    rows["handled/" + label] = ns(env(LD_PRELOAD=lib, FANSTORE_TESTHOOK="handle-getpid", FANSTORE_XSAVE=mode))
for k, v in rows.items():
    extra = "" if k == "bare" else ("   (+%.1f ns over bare)" % (v - rows["bare"]) if k.startswith("pass") else "")
    print("  %-22s %7.1f ns%s" % (k, v, extra))

workloads = {
    "find /usr": ["find", "/usr"],
    "python3 import-heavy start-up": ["/usr/bin/python3", "-c",
        "import json, decimal, email.parser, http.client, xml.dom.minidom, argparse, logging, csv, sqlite3"],
    "tar c /usr/include | (drained)": ["tar", "cf", "-", "/usr/include"],
}
print("\nworkload slowdown, library preloaded, hook passing every call (median of %d alternating runs):" % runs)
results = {}
for name, cmd in workloads.items():
    times = {"native": [], "preloaded": []}
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # warm caches
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env(LD_PRELOAD=lib, FANSTORE_TESTHOOK="pass"))
    for _ in range(runs):
        for key, e in (("native", env()), ("preloaded", env(LD_PRELOAD=lib, FANSTORE_TESTHOOK="pass"))):
            t0 = time.perf_counter()
            # Output into a pipe we drain (tar skips reading files when it writes to /dev/null).
            subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=e, check=False)
            times[key].append(time.perf_counter() - t0)
    a, b = statistics.median(times["native"]), statistics.median(times["preloaded"])
    results[name] = {"native_s": a, "preloaded_s": b, "slowdown": b / a - 1}
    print("  %-34s native %8.2f ms   preloaded %8.2f ms   %+5.1f%%" % (name, a * 1e3, b * 1e3, 100 * (b / a - 1)))
os.makedirs("bench/results", exist_ok=True)
json.dump({"benchmark": "intercept", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "ns_per_call": rows, "workloads": results}, open("bench/results/intercept.json", "w"), indent=1)
print("\nwrote bench/results/intercept.json")
PY
