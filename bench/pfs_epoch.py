#!/usr/bin/python3
"""Epochs over a tree: every file read once per epoch, in a random order, by T threads.
Prints one JSON line per epoch: files, bytes, seconds, files/s, and the time from the
script's start to its first read completed. --after-staging: under one-node fanrun, each
epoch after the first waits until fanrun's copy of DATA is complete (the job's
`staging-from` file, beside $FANSTORE_IMAGE, is gone) and says how long it waited.
Usage: pfs_epoch.py ROOT [--threads T] [--epochs E] [--seed S] [--after-staging]"""
import argparse, json, os, random, sys, time
from concurrent.futures import ThreadPoolExecutor

t_start = time.perf_counter()
p = argparse.ArgumentParser()
p.add_argument("root")
p.add_argument("--threads", type=int, default=1)
p.add_argument("--epochs", type=int, default=1)
p.add_argument("--seed", type=int, default=1)
p.add_argument("--after-staging", action="store_true")
a = p.parse_args()
files = [os.path.join(r, n) for r, _, ns in os.walk(a.root) for n in ns]
first = []

def read(path):
    with open(path, "rb") as f:
        n = len(f.read())
    if not first:
        first.append(time.perf_counter() - t_start)
    return n

marker = os.path.join(os.path.dirname(os.environ.get("FANSTORE_IMAGE", "/nonexistent/x")), "staging-from")
for e in range(a.epochs):
    waited = 0.0
    if e > 0 and a.after_staging:
        t_wait = time.perf_counter()
        while os.path.exists(marker) and time.perf_counter() - t_wait < 600:
            time.sleep(0.05)
        waited = time.perf_counter() - t_wait
    random.Random(a.seed + e).shuffle(files)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(a.threads) as pool:
        nbytes = sum(pool.map(read, files, chunksize=64))
    dt = time.perf_counter() - t0
    print(json.dumps({"epoch": e, "files": len(files), "bytes": nbytes, "seconds": dt,
                      "files_per_s": len(files) / dt, "first_read_s": first[0],
                      "staging_wait_s": waited, "since_start_s": time.perf_counter() - t_start}), flush=True)
