#!/usr/bin/python3
"""Reads large files the two ways training jobs do, and prints one JSON line:
  seq   every file in 1 MiB reads, start to end (a tar shard, a text corpus)
  rand  COUNT reads of 4 KiB at random offsets of each file (an HDF5 or LMDB file)
each twice ("pass1": first contact, "pass2": the same reads again), as MB/s (seq) and
reads/s (rand); rand also "pass3": as many reads at other random offsets in the same
process (a new epoch of a worker that stays). Usage: large_read.py seq|rand ROOT FILE... [--count N]"""
import json
import os
import random
import sys
import time


def main():
    args = sys.argv[1:]
    count = 2000
    if "--count" in args:
        i = args.index("--count")
        count = int(args[i + 1])
        del args[i:i + 2]
    mode, root, names = args[0], args[1], args[2:]
    out = {"mode": mode, "files": len(names)}
    rnd = random.Random(5)
    spots = {}
    for name in names:
        size = os.stat(os.path.join(root, name)).st_size
        spots[name] = [rnd.randrange(0, size - 4096) for _ in range(count)]
    fresh = {}  # "pass3": other random offsets (a new epoch in the same process)
    for name in names:
        size = os.stat(os.path.join(root, name)).st_size
        fresh[name] = [rnd.randrange(0, size - 4096) for _ in range(count)]
    for p in ("pass1", "pass2", "pass3"):
        if mode == "seq" and p == "pass3":
            break
        if p == "pass3":
            spots = fresh
        t0 = time.monotonic()
        total = 0
        for name in names:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            if mode == "seq":
                while True:
                    b = os.read(fd, 1 << 20)
                    if not b:
                        break
                    total += len(b)
            else:
                for off in spots[name]:
                    total += len(os.pread(fd, 4096, off)) > 0
            os.close(fd)
        dt = time.monotonic() - t0
        out[p] = round(total / dt / 1e6, 1) if mode == "seq" else round(total / dt)
    print(json.dumps(out))


if __name__ == "__main__":
    sys.exit(main())
