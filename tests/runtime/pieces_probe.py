#!/usr/bin/python3
"""Reads large members through the runtime and compares them with the native files: random
ranges (some across the 1 MiB piece boundaries of io/pieces.h), a sequential pass in 1 MiB
reads, one whole read, and a mapping of each. Prints "ok NAME" per file, "wrong NAME ..."
for a difference; exit 1 on any. With --sparse: only three 4 KiB reads of each, at 0,
10 MiB and the last bytes. Usage: pieces_probe.py [--sparse] MOUNT NATIVE NAME..."""
import hashlib
import mmap
import os
import random
import sys

PIECE = 1 << 20


def check(mnt, native, name, sparse):
    want = open(os.path.join(native, name), "rb").read()
    fd = os.open(os.path.join(mnt, name), os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if size != len(want):
            return "size %d, expected %d" % (size, len(want))
        if sparse:
            spots = [(0, 4096), (10 << 20, 4096), (size - 4096, 4096)]
        else:
            rnd = random.Random(name)
            spots = [(rnd.randrange(size), rnd.choice([1, 4096, 100000])) for _ in range(60)]
            spots += [(k * PIECE - 3, 4096) for k in range(1, size // PIECE + 1)]  # across pieces
            spots += [(size - 10, 4096), (size, 10)]
        for off, n in spots:
            got = os.pread(fd, n, off)
            if got != want[off:off + n]:
                return "pread(%d, %d) differs" % (n, off)
        if sparse:
            return None
        h = hashlib.sha256()
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            h.update(b)
        if h.digest() != hashlib.sha256(want).digest():
            return "sequential 1 MiB reads differ"
        if os.pread(fd, size, 0) != want:
            return "one whole read differs"
        with mmap.mmap(fd, 0, prot=mmap.PROT_READ) as m:
            if hashlib.sha256(m).digest() != hashlib.sha256(want).digest():
                return "the mapping differs"
        return None
    finally:
        os.close(fd)


def main():
    args = sys.argv[1:]
    sparse = args[0] == "--sparse"
    if sparse:
        args = args[1:]
    mnt, native, names = args[0], args[1], args[2:]
    bad = 0
    for name in names:
        try:
            why = check(mnt, native, name, sparse)
        except OSError as e:
            why = "error: %s" % e
        print(("ok %s" % name) if why is None else ("wrong %s %s" % (name, why)))
        bad += why is not None
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
