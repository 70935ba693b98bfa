"""A small DistributedDataParallel training run, as torchrun starts it: gloo on CPU, a
DistributedSampler, DataLoader workers reading files. Every process writes, to
OUT/rank<RANK>.json, the samples it saw (paths relative to the data root, in order, per
epoch), a digest of their bytes, the environment torchrun gave it, and (rank 0) a digest
of the final parameters, so that runs over the same files can be compared exactly.
Usage: ddp_train.py DATA_ROOT OUT_DIR"""
import hashlib
import json
import os
import sys

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class Files(Dataset):
    def __init__(self, root):
        self.root = root
        self.items = []
        for d, dirs, files in os.walk(root):
            dirs.sort()
            for f in sorted(files):
                p = os.path.join(d, f)
                self.items.append((os.path.relpath(p, root), int(os.path.relpath(p, root).split(os.sep)[0][1:])))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        rel, label = self.items[i]
        with open(os.path.join(self.root, rel), "rb") as f:
            data = f.read()
        x = torch.tensor(list(data[:64].ljust(64, b"\0")), dtype=torch.float32) / 255.0
        return x, label, rel, hashlib.sha256(data).hexdigest()


def main():
    root, out = sys.argv[1], sys.argv[2]
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    ds = Files(root)
    sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True, seed=1)
    loader = DataLoader(ds, batch_size=8, sampler=sampler, num_workers=2)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(64, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    seen, digest = [], hashlib.sha256()
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for x, y, rels, sums in loader:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            seen.extend(rels)
            for s in sums:
                digest.update(s.encode())
    params = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()
    env = {k: os.environ.get(k) for k in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR")}
    with open(os.path.join(out, "rank%d.json" % rank), "w") as f:
        json.dump({"samples": seen, "bytes": digest.hexdigest(), "params": params, "env": env,
                   "files": len(ds)}, f, sort_keys=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
