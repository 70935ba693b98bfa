#!/usr/bin/python3
"""Reads every file listed in a checksum manifest ("sha256  ./relpath" lines, as sha256sum
prints them) below ROOT, and prints one line per file: "relpath ok|wrong|<errno name> seconds".
Exit status 0 unless a file gave wrong bytes. Usage: read_all.py ROOT MANIFEST"""
import errno
import hashlib
import os
import sys
import time


def main():
    root, manifest = sys.argv[1], sys.argv[2]
    wrong = 0
    with open(manifest) as f:
        entries = [line.rstrip("\n").split("  ", 1) for line in f if line.strip()]
    for digest, rel in entries:
        rel = rel[2:] if rel.startswith("./") else rel
        t0 = time.monotonic()
        try:
            with open(os.path.join(root, rel), "rb") as g:
                got = hashlib.sha256(g.read()).hexdigest()
            result = "ok" if got == digest else "wrong"
        except OSError as e:
            result = errno.errorcode.get(e.errno, str(e.errno))
        wrong += result == "wrong"
        print("%s %s %.3f" % (rel, result, time.monotonic() - t0))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
