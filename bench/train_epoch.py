#!/usr/bin/python3
"""One epoch of a typical PyTorch input pipeline over an ImageFolder tree (decode, resize,
to tensor; DataLoader with worker processes), printing what it read and how fast.
Falls back to a plain Python reader (open + read every file) where torch is absent.
Usage: train_epoch.py ROOT [--workers N] [--batch B] [--json]"""
import argparse
import hashlib
import json
import os
import sys
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("root")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    t0 = time.perf_counter()
    try:
        import torch
        import torchvision
        from torch.utils.data import DataLoader
    except ImportError:
        files = nbytes = 0
        h = hashlib.sha256()
        for root, _, names in sorted(os.walk(a.root)):
            for n in sorted(names):
                with open(os.path.join(root, n), "rb") as f:
                    data = f.read()
                files += 1
                nbytes += len(data)
                h.update(data)
        dt = time.perf_counter() - t0
        r = {"reader": "python", "files": files, "bytes": nbytes, "seconds": dt,
             "files_per_s": files / dt, "checksum": h.hexdigest()[:16]}
    else:
        tf = torchvision.transforms.Compose([torchvision.transforms.Resize((64, 64)),
                                             torchvision.transforms.ToTensor()])
        ds = torchvision.datasets.ImageFolder(a.root, transform=tf)
        loader = DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers,
                            generator=torch.Generator().manual_seed(0))
        n = 0
        total = 0.0
        for images, labels in loader:
            n += len(labels)
            total += float(images.sum())
        dt = time.perf_counter() - t0
        r = {"reader": "torch DataLoader (%d workers)" % a.workers, "samples": n,
             "classes": len(ds.classes), "seconds": dt, "samples_per_s": n / dt,
             "pixel_sum": round(total, 1)}
    if a.json:
        print(json.dumps(r))
    else:
        print("epoch: " + ", ".join("%s=%s" % (k, round(v, 3) if isinstance(v, float) else v) for k, v in r.items()))


if __name__ == "__main__":
    sys.exit(main())
