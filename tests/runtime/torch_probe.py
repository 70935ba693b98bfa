#!/usr/bin/python3
"""A PyTorch input pipeline over an ImageFolder tree: prints the sorted multiset of
(label, tensor checksum) one epoch yields, so a native run and a run under fanrun can be
compared exactly. With --distributed, the epoch is this rank's share (a DistributedSampler
over FANSTORE_RANK of FANSTORE_NODES, as a data-parallel job splits it).
Usage: torch_probe.py ROOT START_METHOD(fork|spawn) [--time] [--distributed]"""
import os
import hashlib
import sys
import time

import torch
import torchvision
from torch.utils.data import DataLoader


def main():
    root, method = sys.argv[1], sys.argv[2]
    transform = torchvision.transforms.Compose([
        torchvision.transforms.Resize((32, 32)),
        torchvision.transforms.ToTensor(),
    ])
    ds = torchvision.datasets.ImageFolder(root, transform=transform)
    if "--distributed" in sys.argv:
        sampler = torch.utils.data.distributed.DistributedSampler(
            ds, num_replicas=int(os.environ["FANSTORE_NODES"]),
            rank=int(os.environ["FANSTORE_RANK"]), shuffle=True, seed=0)
        loader = DataLoader(ds, batch_size=8, sampler=sampler, num_workers=2,
                            multiprocessing_context=method)
    else:
        loader = DataLoader(ds, batch_size=8, shuffle=True, num_workers=2,
                            multiprocessing_context=method,
                            generator=torch.Generator().manual_seed(0))
    t0 = time.perf_counter()
    seen = []
    for images, labels in loader:
        for img, lab in zip(images, labels):
            seen.append((int(lab), hashlib.md5(img.numpy().tobytes()).hexdigest()))
    dt = time.perf_counter() - t0
    for lab, h in sorted(seen):
        print(lab, h)
    if "--time" in sys.argv:
        print("epoch: %d samples in %.3f s (%.0f samples/s)" % (len(seen), dt, len(seen) / dt),
              file=sys.stderr)


if __name__ == "__main__":
    main()
