#!/usr/bin/python3
"""One epoch of a typical PyTorch input pipeline over an ImageFolder tree (decode, resize,
to tensor; DataLoader with worker processes), printing what it read and how fast.
Falls back to a plain Python reader (open + read every file) where torch is absent.
--split: each sample's file is read whole (timed), then decoded from memory (timed): the
epoch reports how much of the workers' time went to reading and how much to decoding.
Usage: train_epoch.py ROOT [--workers N] [--batch B] [--split] [--json]"""
import argparse
import hashlib
import io
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
    p.add_argument("--split", action="store_true")
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
        if a.split:
            from PIL import Image

            class Split(torch.utils.data.Dataset):
                """ImageFolder's samples, read whole and then decoded, each step timed."""
                def __len__(self):
                    return len(ds.samples)

                def __getitem__(self, i):
                    path, label = ds.samples[i]
                    t_read = time.perf_counter()
                    with open(path, "rb") as f:
                        data = f.read()
                    t_decode = time.perf_counter()
                    x = tf(Image.open(io.BytesIO(data)).convert("RGB"))
                    t_end = time.perf_counter()
                    return x, label, t_decode - t_read, t_end - t_decode
            source = Split()
        else:
            source = ds
        loader = DataLoader(source, batch_size=a.batch, shuffle=True, num_workers=a.workers,
                            generator=torch.Generator().manual_seed(0))
        n = 0
        total = read_s = decode_s = 0.0
        for batch in loader:
            n += len(batch[1])
            total += float(batch[0].sum())
            if a.split:
                read_s += float(batch[2].sum())
                decode_s += float(batch[3].sum())
        dt = time.perf_counter() - t0
        r = {"reader": "torch DataLoader (%d workers)" % a.workers, "samples": n,
             "classes": len(ds.classes), "seconds": dt, "samples_per_s": n / dt,
             "pixel_sum": round(total, 1)}
        if a.split:
            r.update({"worker_read_s": read_s, "worker_decode_s": decode_s,
                      "read_share": read_s / (read_s + decode_s) if read_s + decode_s else 0.0})
    if a.json:
        print(json.dumps(r))
    else:
        print("epoch: " + ", ".join("%s=%s" % (k, round(v, 3) if isinstance(v, float) else v) for k, v in r.items()))


if __name__ == "__main__":
    sys.exit(main())
