#!/usr/bin/python3
"""The container formats training data often comes in, written natively and then read
natively and under fanrun: the two outputs must be identical.
Usage: formats_probe.py make DIR   (writes DIR/formats/...)
       formats_probe.py read DIR FORMAT...   (tar zip lmdb hdf5 sqlite memmap)
A library missing from this machine is reported as such by `make` (and its format left
out), so the caller can say which check it skips and why."""
import hashlib
import io
import os
import sys

SAMPLES = 40


def sample(i):
    """A deterministic sample of a few KiB (some compressible, some not)."""
    h = hashlib.sha256(b"sample-%d" % i).digest()
    return h * (50 + i * 7) + bytes(range(256)) * (i % 5)


def make(root):
    out = os.path.join(root, "formats")
    os.makedirs(out, exist_ok=True)
    made = []
    # tar shards, as WebDataset writes them: key.cls + key.bin per sample
    import tarfile
    for shard in range(2):
        with tarfile.open(os.path.join(out, "shard-%04d.tar" % shard), "w") as t:
            for i in range(shard * SAMPLES // 2, (shard + 1) * SAMPLES // 2):
                for ext, data in (("cls", b"%d" % (i % 3)), ("bin", sample(i))):
                    info = tarfile.TarInfo("%06d.%s" % (i, ext))
                    info.size = len(data)
                    info.mtime = 1600000000
                    t.addfile(info, io.BytesIO(data))
    made.append("tar")
    import zipfile
    with zipfile.ZipFile(os.path.join(out, "samples.zip"), "w") as z:
        for i in range(SAMPLES):
            z.writestr(zipfile.ZipInfo("s/%06d.bin" % i, (2020, 1, 1, 0, 0, 0)), sample(i),
                       zipfile.ZIP_DEFLATED if i % 2 else zipfile.ZIP_STORED)
    made.append("zip")
    import sqlite3
    db = sqlite3.connect(os.path.join(out, "samples.sqlite"))
    db.execute("create table s (k integer primary key, label integer, data blob)")
    db.executemany("insert into s values (?, ?, ?)",
                   [(i, i % 3, sample(i)) for i in range(SAMPLES)])
    db.commit()
    db.close()
    made.append("sqlite")
    import numpy as np
    a = (np.arange(SAMPLES * 1000, dtype=np.int32) * 7919 % 10007).reshape(SAMPLES, 1000)
    a.tofile(os.path.join(out, "array.i32"))
    made.append("memmap")
    try:
        import lmdb
        env = lmdb.open(os.path.join(out, "samples.lmdb"), map_size=1 << 24)
        with env.begin(write=True) as txn:
            for i in range(SAMPLES):
                txn.put(b"%06d" % i, sample(i))
        env.close()
        os.remove(os.path.join(out, "samples.lmdb", "lock.mdb"))  # (readers open without it)
        made.append("lmdb")
    except ImportError:
        print("lmdb: python3-lmdb is not installed")
    try:
        import h5py
        with h5py.File(os.path.join(out, "samples.h5"), "w") as f:
            f.create_dataset("data", data=a, chunks=(4, 1000))
            f.create_dataset("packed", data=a, chunks=(8, 500), compression="gzip")
            f.create_dataset("labels", data=np.arange(SAMPLES) % 3)
        made.append("hdf5")
    except ImportError:
        print("hdf5: python3-h5py is not installed")
    print("made:", " ".join(made))


def digest(b):
    return hashlib.sha256(bytes(b)).hexdigest()[:16]


def read(root, formats):
    d = os.path.join(root, "formats")
    for fmt in formats:
        if fmt == "tar":  # sequential, as a WebDataset pipeline reads its shards
            import tarfile
            for shard in sorted(x for x in os.listdir(d) if x.endswith(".tar")):
                with tarfile.open(os.path.join(d, shard), "r|") as t:
                    for m in t:
                        print("tar", shard, m.name, m.size, digest(t.extractfile(m).read()))
            # and random access through the index, as a map-style dataset would
            with tarfile.open(os.path.join(d, "shard-0001.tar")) as t:
                for name in ("000031.bin", "000020.bin", "000039.cls"):
                    print("tar seek", name, digest(t.extractfile(name).read()))
        elif fmt == "zip":
            import zipfile
            with zipfile.ZipFile(os.path.join(d, "samples.zip")) as z:
                for name in sorted(z.namelist(), reverse=True):
                    print("zip", name, digest(z.read(name)))
        elif fmt == "sqlite":  # a read-only database: its locks and journal checks
            import sqlite3
            uri = "file:%s?mode=ro" % os.path.join(d, "samples.sqlite")
            db = sqlite3.connect(uri, uri=True)
            for k, label, data in db.execute("select k, label, data from s order by k desc"):
                print("sqlite", k, label, digest(data))
            print("sqlite count", db.execute("select count(*), sum(length(data)) from s").fetchone())
            db.close()
        elif fmt == "memmap":
            import numpy as np
            m = np.memmap(os.path.join(d, "array.i32"), dtype=np.int32, mode="r").reshape(-1, 1000)
            print("memmap", m.shape, int(m.sum()), int(m[::3, 5].sum()))
            f = np.fromfile(os.path.join(d, "array.i32"), dtype=np.int32, count=5000, offset=4000)
            print("fromfile", int(f.sum()))
        elif fmt == "lmdb":  # the usual way to read a training LMDB: read-only, no lock file
            import lmdb
            env = lmdb.open(os.path.join(d, "samples.lmdb"), readonly=True, lock=False)
            with env.begin() as txn:
                print("lmdb entries", txn.stat()["entries"])
                for k, v in txn.cursor():
                    print("lmdb", k.decode(), digest(v))
                print("lmdb get", digest(txn.get(b"000017")))
            env.close()
        elif fmt == "hdf5":
            import h5py
            with h5py.File(os.path.join(d, "samples.h5"), "r") as f:
                for name in sorted(f):
                    ds = f[name]
                    print("hdf5", name, ds.shape, ds.dtype, ds.compression, digest(ds[()]))
                print("hdf5 slice", digest(f["packed"][5:17, 100:600]), int(f["data"][7].sum()))
        else:
            sys.exit("formats_probe.py: unknown format " + fmt)


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "make":
        make(sys.argv[2])
    elif len(sys.argv) >= 4 and sys.argv[1] == "read":
        read(sys.argv[2], sys.argv[3:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
