#!/usr/bin/python3
"""Epochs over a tree: every file read once per epoch, in a random order, by T threads.
Prints one JSON line per epoch: files, bytes, seconds, files/s, and the time from the
script's start to its first read completed. --after-staging: under one-node fanrun, each
epoch after the first waits until fanrun's copy of DATA is complete (the job's
`staging-from` file, beside $FANSTORE_IMAGE, is gone) and says how long it waited.
--shard: this rank's files only, as torch's DistributedSampler gives them (the epoch's
shuffled order, every N-th file from the rank's place; $FANSTORE_RANK of $FANSTORE_NODES).
--step-ms MS: a training loop: the files are read in batches of --batch (32) by the
threads, at most two batches per thread ahead of the step (a DataLoader's prefetch), and
each batch is followed by MS milliseconds of an accelerator's step, which leaves the CPU
free (a sleep).
Usage: pfs_epoch.py ROOT [--threads T] [--epochs E] [--seed S] [--after-staging] [--shard]
                    [--step-ms MS [--batch B]]"""
import argparse, json, os, random, sys, threading, time
from concurrent.futures import ThreadPoolExecutor

t_start = time.perf_counter()
p = argparse.ArgumentParser()
p.add_argument("root")
p.add_argument("--threads", type=int, default=1)
p.add_argument("--epochs", type=int, default=1)
p.add_argument("--seed", type=int, default=1)
p.add_argument("--after-staging", action="store_true")
p.add_argument("--shard", action="store_true")
p.add_argument("--step-ms", type=float, default=0)
p.add_argument("--batch", type=int, default=32)
a = p.parse_args()
files = sorted(os.path.join(r, n) for r, _, ns in os.walk(a.root) for n in ns)
rank, nodes = int(os.environ.get("FANSTORE_RANK", 0)), int(os.environ.get("FANSTORE_NODES", 1))
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
    order = list(files)
    random.Random(a.seed + e).shuffle(order)
    if a.shard:
        order = order[rank::nodes]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(a.threads) as pool:
        if a.step_ms > 0:
            # Batch k starts once the step has taken batch k - 2T: bounded by index, not by a
            # semaphore, which a later batch could take first while the step waits for k.
            stepped = threading.Condition()
            done = [-1]
            def read_batch(k_batch):
                k, batch = k_batch
                with stepped:
                    stepped.wait_for(lambda: done[0] >= k - 2 * a.threads)
                return sum(read(path) for path in batch)
            nbytes = 0
            batches = [order[i:i + a.batch] for i in range(0, len(order), a.batch)]
            for k, n in enumerate(pool.map(read_batch, enumerate(batches))):
                nbytes += n
                time.sleep(a.step_ms / 1000)
                with stepped:
                    done[0] = k
                    stepped.notify_all()
        else:
            nbytes = sum(pool.map(read, order, chunksize=64))
    dt = time.perf_counter() - t0
    print(json.dumps({"epoch": e, "files": len(order), "bytes": nbytes, "seconds": dt,
                      "files_per_s": len(order) / dt, "first_read_s": first[0],
                      "staging_wait_s": waited, "since_start_s": time.perf_counter() - t_start}), flush=True)
