#!/usr/bin/python3
"""Python's ways into files, run from inside a tree: natively and under fanrun the outputs
must be identical. Usage: py_probe.py walk|rglob|copyfile OUT|mmap FILE|npy FILE|pil DIR|subprocess FILE|
inherit FILE DIR|fork-close FILE OTHER"""
import hashlib
import mmap
import os
import pathlib
import shutil
import subprocess
import sys


def main():
    cmd = sys.argv[1]
    if cmd == "walk":  # os.walk + open().read() + hashlib
        for root, dirs, files in sorted(os.walk(".")):
            dirs.sort()
            for f in sorted(files):
                p = os.path.join(root, f)
                if os.path.islink(p) and not os.path.exists(p):
                    print(p, "dangling")
                    continue
                with open(p, "rb") as fh:
                    print(p, hashlib.sha256(fh.read()).hexdigest())
    elif cmd == "rglob":
        for p in sorted(pathlib.Path(".").rglob("*")):
            print(p, p.is_dir(), p.is_symlink(), p.stat().st_size if p.exists() else -1)
    elif cmd == "copyfile":  # sendfile/copy_file_range underneath
        out = sys.argv[2]
        for p in sorted(pathlib.Path(".").rglob("*.JPEG"))[:20]:
            dst = os.path.join(out, str(p).replace("/", "_"))
            shutil.copyfile(p, dst)
            print(p, hashlib.md5(open(dst, "rb").read()).hexdigest())
    elif cmd == "mmap":
        with open(sys.argv[2], "rb") as fh:
            m = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            print(len(m), hashlib.sha256(m[:]).hexdigest(), m[:16].hex())
    elif cmd == "npy":
        import numpy as np
        a = np.load(sys.argv[2], mmap_mode="r")
        print(a.shape, a.dtype, float(a.sum()), float(a[::7].mean()))
    elif cmd == "pil":
        from PIL import Image
        for p in sorted(pathlib.Path(sys.argv[2]).rglob("*.JPEG"))[:40]:
            im = Image.open(p)
            im.load()
            print(p, im.size, im.mode, hashlib.md5(im.tobytes()).hexdigest())
    elif cmd == "subprocess":  # a child program reading the tree
        r = subprocess.run(["md5sum", sys.argv[2]], capture_output=True, text=True, check=True)
        print(r.stdout.strip())
    elif cmd == "inherit":  # open fds passed to exec'd programs, offsets shared
        with open(sys.argv[2], "rb", buffering=0) as f:
            f.read(6)  # the child goes on from here, and its reads move our offset
            print(subprocess.run(["head", "-c", "8"], stdin=f, capture_output=True).stdout)
            print(f.tell(), f.read(5))
            fd = f.fileno()  # pass_fds: the same number in the child (vfork + dup)
            script = f"head -c 9 <&{fd}; env | grep -c FANSTORE_FDS"
            print(subprocess.run(["sh", "-c", script], pass_fds=[fd], capture_output=True).stdout)
            # posix_spawn with a dup2 file action: glibc's clone(CLONE_VFORK) path
            r, w = os.pipe()
            pid = os.posix_spawn("/usr/bin/wc", ["wc", "-c"], os.environ,
                                 file_actions=[(os.POSIX_SPAWN_DUP2, fd, 0),
                                               (os.POSIX_SPAWN_DUP2, w, 1)])
            os.close(w)
            print(os.read(r, 100), os.waitpid(pid, 0)[1])
            os.close(r)
        d = os.open(sys.argv[3], os.O_RDONLY | os.O_DIRECTORY)
        os.set_inheritable(d, True)
        code = f"import os; print(sorted(os.listdir({d})), os.fstat({d}).st_mode)"
        print(subprocess.run([sys.executable, "-c", code], close_fds=False,
                             capture_output=True).stdout)
    elif cmd == "fork-close":  # a child's close must not end the parent's open file
        f = open(sys.argv[2], "rb")
        pid = os.fork()
        if pid == 0:
            f.close()
            os._exit(0)
        os.waitpid(pid, 0)
        with open(sys.argv[3], "rb") as g:
            print(f.read(30), g.read(10))
    else:
        sys.exit("py_probe.py: unknown command " + cmd)


if __name__ == "__main__":
    main()
