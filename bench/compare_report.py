#!/usr/bin/python3
"""Prints the ratio table of a bench/compare.sh result and plots it with gnuplot.

Usage: compare_report.py bench/results/compare.json  (writes compare.png beside it)
"""
import json
import os
import shutil
import statistics
import subprocess
import sys


def name(c):
    """A configuration's label: epoch rows count new processes, the others threads."""
    op, n, cache = c
    if cache.startswith("epoch"):
        return "%s %d new proc %s" % (op, n, cache)
    return "%s %d thr %s" % c


def main():
    path = sys.argv[1]
    d = json.load(open(path))
    rows = d["rows"]
    configs, targets = [], []
    runs = {}  # (label, op, threads, cache) -> {round: files/s}
    native_label = None
    for r in rows:
        c = (r["op"], r["threads"], r["cache"])
        if c not in configs:
            configs.append(c)
        if r["label"] not in targets:
            targets.append(r["label"])
        if r["target"] == "native":
            native_label = r["label"]
        runs.setdefault((r["label"],) + c, {})[r.get("round", 1)] = r["result"]["items_per_s"]
    rate = {k: statistics.median(v.values()) for k, v in runs.items()}
    print("\nfiles/s, median of %d round(s) (ratio of medians to native), %d files of ~%s KB, "
          "warm runs of %s s:" % (d.get("rounds", 1), d["files"], d["mean_kb"], d["seconds"]))
    print("%-28s" % "config" + "".join("%24s" % t for t in targets))
    for c in configs:
        line = "%-28s" % name(c)
        n = rate.get((native_label,) + c)
        for t in targets:
            v = rate.get((t,) + c)
            line += "%24s" % ("-" if v is None else "%.0f (%.2fx)" % (v, v / n if n else 0))
        print(line)
    print("\neach round's ratio to native (the same round's native run):")
    for t in targets:
        if t == native_label:
            continue
        for c in configs:
            own, base = runs.get((t,) + c, {}), runs.get((native_label,) + c, {})
            ratios = ["%.2f" % (own[k] / base[k]) for k in sorted(own) if base.get(k)]
            if ratios:
                print("  %-16s %-28s %s" % (t, name(c), ", ".join(ratios)))
    if not shutil.which("gnuplot"):
        print("(gnuplot not installed: no plot)")
        return 0
    dat = os.path.splitext(path)[0] + ".dat"
    png = os.path.splitext(path)[0] + ".png"
    with open(dat, "w") as f:
        f.write("config " + " ".join('"%s"' % t for t in targets) + "\n")
        for c in configs:
            f.write('"%s" ' % name(c) + " ".join(
                "%.0f" % rate[(t,) + c] if (t,) + c in rate else "0" for t in targets) + "\n")
    script = """
set terminal pngcairo size 1000,520 noenhanced
set output '%s'
set title 'fsbench on %d files of ~%s KB (higher is better)'
set style data histogram
set style histogram cluster gap 1
set style fill solid 0.8 border -1
set logscale y
set ylabel 'files/s (log scale)'
set key top right
set grid ytics
set xtics rotate by -20
plot for [i=2:%d] '%s' using i:xtic(1) title columnheader(i)
""" % (png, d["files"], d["mean_kb"], len(targets) + 1, dat)
    subprocess.run(["gnuplot"], input=script.encode(), check=True)
    print("plot: %s" % png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
