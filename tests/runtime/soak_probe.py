#!/usr/bin/python3
"""Many epochs of a PyTorch DataLoader over an ImageFolder tree, new workers each epoch (2,
fork and spawn in turn), as a long training job reads. After each epoch prints one line:
the epoch, its start method, a digest of the sorted (label, tensor checksum) multiset it
yielded, and the resident memory (kB) and open descriptors of this process and of its
parent (fanrun, whose thread is the node agent).
Usage: soak_probe.py ROOT EPOCHS"""
import gc
import hashlib
import os
import sys

import torch
import torchvision
from torch.utils.data import DataLoader


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def main():
    root, epochs = sys.argv[1], int(sys.argv[2])
    transform = torchvision.transforms.Compose([
        torchvision.transforms.Resize((32, 32)),
        torchvision.transforms.ToTensor(),
    ])
    ds = torchvision.datasets.ImageFolder(root, transform=transform)
    parent = os.getppid()
    for epoch in range(1, epochs + 1):
        method = "fork" if epoch % 2 else "spawn"
        loader = DataLoader(ds, batch_size=8, shuffle=True, num_workers=2,
                            multiprocessing_context=method,
                            generator=torch.Generator().manual_seed(epoch))
        seen = []
        for images, labels in loader:
            for img, lab in zip(images, labels):
                seen.append("%d %s" % (int(lab), hashlib.md5(img.numpy().tobytes()).hexdigest()))
        del loader  # (its workers and their pipes are gone before the counts below)
        gc.collect()
        digest = hashlib.md5("\n".join(sorted(seen)).encode()).hexdigest()
        print(epoch, method, len(seen), digest, rss_kb(os.getpid()), fds(os.getpid()),
              rss_kb(parent), fds(parent), flush=True)


if __name__ == "__main__":
    main()
