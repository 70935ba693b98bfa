# Shared by the container tests: the bundle unpacked (its library is what an image's
# processes load), a dataset with its native checksums, and a Python reader.
# Source after tests/bin/lib.sh with SRCDIR set; sets B (the bundle), S (scratch), DS (the
# packed dataset), NATIVE (md5sum lines of every file), MNT (a mount path no image has).
S=$SCRATCH
# (checks read fanrun's stderr for one line: no start-up lines, such as the copy of this
# local dataset to /dev/shm fanrun makes where the node makes shmem huge pages)
export FANSTORE_QUIET=1
ROOTS=${FANSTORE_ROOTS:-/var/cache/fanstore-roots}
tarball=${TARBALL:-$(ls -t "$SRCDIR"/build/bundle/fanstore-*-linux-x86_64.tar.gz 2>/dev/null | head -1)}
if [ -z "$tarball" ] || [ ! -f "$tarball" ]; then
  echo "SKIP: no bundle (ci/bundle.sh makes build/bundle/fanstore-*.tar.gz): an image's processes load the bundle's library"
  exit 77
fi
tar -C "$S" -xzf "$tarball" || { bad "cannot unpack $tarball"; finish; exit 1; }
B=$(echo "$S"/fanstore-*-linux-x86_64)
export USER=${USER:-$(id -un)}

# 80 files of 1 B to 300 KiB, raw and compressed, in nested directories, and a name with a
# space; packed in 3 partitions.
T=$S/src
mkdir -p "$T/a/b" "$T/c d" "$T/txt"
for i in $(seq 1 50); do head -c $(((i * 6151) % 300000 + 1)) /dev/urandom >"$T/a/f$i.bin"; done
for i in $(seq 1 25); do seq "$i" $((i * 400)) >"$T/txt/t$i.txt"; done
echo hello >"$T/a/b/x.txt"
head -c 5000 /dev/urandom >"$T/c d/space name"
"$B/bin/fanstore" pack -q --partitions 3 "$T" "$S/ds" || { bad "fanstore pack"; finish; exit 1; }
DS=$S/ds
NATIVE=$S/native.sum
(cd "$T" && find . -type f | LC_ALL=C sort | xargs -d '\n' md5sum | sed 's|  \./|  |') >"$NATIVE"
MNT=/fanstore-container-test-$$

# reader.py ROOT OUT: md5sum-style lines of every file under ROOT, sorted, into OUT.
cat >"$S/reader.py" <<'PY'
import hashlib, os, sys
root, out = sys.argv[1], sys.argv[2]
rows = []
for d, _, files in os.walk(root):
    for f in files:
        p = os.path.join(d, f)
        with open(p, "rb") as fh:
            rows.append(hashlib.md5(fh.read()).hexdigest() + "  " + os.path.relpath(p, root))
with open(out, "w") as fh:
    fh.write("".join(r + "\n" for r in sorted(rows, key=lambda r: r[34:].encode())))
PY
# writer.py PATH: the error a write into the mount gives.
cat >"$S/writer.py" <<'PY'
import errno, os, sys
try:
    os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
    print("written")
except OSError as e:
    print(errno.errorcode[e.errno])
PY

# same_as_native FILE WHAT: FILE lists every file byte-exact.
same_as_native() {
  if [ -s "$1" ] && cmp -s "$1" "$NATIVE"; then ok; else
    bad "$2: $(diff "$1" "$NATIVE" 2>&1 | head -3 | tr '\n' ' ')"
  fi
}
