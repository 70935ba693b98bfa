#!/usr/bin/python3
"""Deterministic generator of benchmark datasets.

  gen_dataset.py imagenet OUT [--files N] [--classes C] [--val-fraction F] [--mean-kb K]
                              [--seed S] [--real-jpeg]
      An ImageNet-like tree: train/<wnid>/<wnid>_<i>.JPEG and val/<wnid>/..., file sizes
      log-normal around K KiB (ImageNet-1k: mean ~110 KB), plus text metadata
      (synset mapping, label CSV). Bodies are incompressible like real JPEG entropy data,
      behind a JPEG header; --real-jpeg writes decodable JPEGs (PIL) of noise images instead.
  gen_dataset.py text OUT [--files N] [--mean-kb K] [--seed S]
      A compressible tree: CSV-like text, log lines and .npy float32 arrays of smooth signals.

The same arguments always give the same bytes. Prints one summary line.
"""
import argparse
import io
import os
import sys

import numpy as np


def wnids(rng, n):
    ids = sorted({int(x) for x in rng.integers(1_000_000, 15_000_000, size=n * 3)})[:n]
    return ["n%08d" % i for i in ids]


def jpeg_like(rng, size):
    head = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    body = rng.bytes(max(0, size - len(head) - 2))
    return head + body + b"\xff\xd9"


def real_jpeg(rng, size):
    from PIL import Image
    side = max(16, int((size / 1.6) ** 0.5))  # noise JPEG at q=90: ~1.6 bytes/pixel
    pixels = rng.integers(0, 256, size=(side, side, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def gen_imagenet(a):
    rng = np.random.default_rng(a.seed)
    classes = wnids(rng, a.classes)
    n_val = int(a.files * a.val_fraction)
    n_train = a.files - n_val
    mu = np.log(a.mean_kb * 1024) - 0.5 * 0.5 ** 2
    sizes = np.clip(rng.lognormal(mu, 0.5, size=a.files), 2048, 4 << 20).astype(int)
    make = real_jpeg if a.real_jpeg else jpeg_like
    total = 0
    labels = ["path,label"]
    for i in range(a.files):
        split = "train" if i < n_train else "val"
        c = i % len(classes)
        rel = "%s/%s/%s_%d.JPEG" % (split, classes[c], classes[c], i)
        data = make(rng, int(sizes[i]))
        write(os.path.join(a.out, rel), data)
        total += len(data)
        labels.append("%s,%d" % (rel, c))
    meta = "".join("%s class_%d\n" % (w, k) for k, w in enumerate(classes)).encode()
    write(os.path.join(a.out, "LOC_synset_mapping.txt"), meta)
    write(os.path.join(a.out, "labels.csv"), ("\n".join(labels) + "\n").encode())
    return a.files + 2, total + len(meta)


def gen_text(a):
    rng = np.random.default_rng(a.seed)
    words = ["alpha", "beta", "gamma", "delta", "epoch", "loss", "accuracy", "tensor",
             "gradient", "batch", "layer", "weight", "sample", "label", "node"]
    total = 0
    for i in range(a.files):
        target = int(max(512, rng.lognormal(np.log(a.mean_kb * 1024), 0.6)))
        kind = i % 3
        if kind == 0:
            rows = []
            n = 0
            while n < target:
                row = "%d,%s,%.4f,%.4f,%d\n" % (n, words[rng.integers(len(words))],
                                                 rng.random(), rng.normal(), rng.integers(1000))
                rows.append(row)
                n += len(row)
            data, rel = "".join(rows).encode(), "tables/t%05d.csv" % i
        elif kind == 1:
            lines = []
            n = 0
            while n < target:
                line = "step %d %s=%.5f %s=%.3f node%02d ok\n" % (
                    n, words[rng.integers(len(words))], rng.random(),
                    words[rng.integers(len(words))], rng.random() * 100, rng.integers(16))
                lines.append(line)
                n += len(line)
            data, rel = "".join(lines).encode(), "logs/l%05d.log" % i
        else:
            count = max(16, target // 4)
            t = np.linspace(0, 20 * np.pi, count, dtype=np.float32)
            arr = (np.sin(t * (1 + i % 7)) * 100).round(1).astype(np.float32)
            buf = io.BytesIO()
            np.save(buf, arr)
            data, rel = buf.getvalue(), "arrays/a%05d.npy" % i
        write(os.path.join(a.out, rel), data)
        total += len(data)
    return a.files, total


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kind", choices=["imagenet", "text"])
    p.add_argument("out")
    p.add_argument("--files", type=int, default=2000)
    p.add_argument("--classes", type=int, default=100)
    p.add_argument("--val-fraction", type=float, default=0.1)
    p.add_argument("--mean-kb", type=float, default=None)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--real-jpeg", action="store_true")
    a = p.parse_args()
    if a.files < 1:
        p.error("--files must be at least 1")
    if os.path.exists(a.out) and os.listdir(a.out):
        print("gen_dataset.py: %s: exists and is not empty" % a.out, file=sys.stderr)
        return 1
    if a.mean_kb is None:
        a.mean_kb = 110 if a.kind == "imagenet" else 64
    n, total = gen_imagenet(a) if a.kind == "imagenet" else gen_text(a)
    print("generated %s tree %s: %d files, %.1f MiB" % (a.kind, a.out, n, total / 2**20))
    return 0


if __name__ == "__main__":
    sys.exit(main())
