#!/usr/bin/python3
"""Prints the ratio table of a bench/compare.sh result and plots it with gnuplot.

Usage: compare_report.py bench/results/compare.json  (writes compare.png beside it)
"""
import json
import os
import shutil
import subprocess
import sys


def main():
    path = sys.argv[1]
    d = json.load(open(path))
    rows = d["rows"]
    native = {(r["op"], r["threads"], r["cache"]): r["result"]["items_per_s"]
              for r in rows if r["target"] == "native"}
    configs = []
    for r in rows:
        key = (r["op"], r["threads"], r["cache"])
        if key not in configs:
            configs.append(key)
    targets = []
    for r in rows:
        if r["label"] not in targets:
            targets.append(r["label"])
    rate = {(r["label"],) + (r["op"], r["threads"], r["cache"]): r["result"]["items_per_s"] for r in rows}
    print("\nfiles/s (ratio to native), %d files of ~%s KB, warm runs of %s s:" % (d["files"], d["mean_kb"], d["seconds"]))
    head = "%-22s" % "config" + "".join("%24s" % t for t in targets)
    print(head)
    for c in configs:
        line = "%-22s" % ("%s %d thr %s" % (c[0], c[1], c[2]))
        for t in targets:
            v = rate.get((t,) + c)
            n = native.get(c)
            line += "%24s" % ("-" if v is None else "%.0f (%.2fx)" % (v, v / n if n else 0))
        print(line)
    if not shutil.which("gnuplot"):
        print("(gnuplot not installed: no plot)")
        return 0
    dat = os.path.splitext(path)[0] + ".dat"
    png = os.path.splitext(path)[0] + ".png"
    with open(dat, "w") as f:
        f.write("config " + " ".join('"%s"' % t for t in targets) + "\n")
        for c in configs:
            f.write('"%s %d thr %s" ' % c + " ".join(
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
