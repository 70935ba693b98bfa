#!/usr/bin/env bash
# The bundle as a cluster user meets it (run by ci/bundle-suite.sh inside a Debian 11 root
# that holds python3 and one MPI's runtime packages, no compiler, no -dev package): unpacked
# in a scratch directory, it packs and verifies a dataset, serves it to a Python reader on
# one node, and under the MPI's launcher with two ranks and a local directory, each read
# byte-exact against the same reader on the native files, with the native files moved away;
# and fsbench runs two ranks under the same launcher.
# Usage: cluster_test.sh TARBALL mpich|openmpi
TARBALL=$1
MPI=$2
. "$(dirname "$0")/../bin/lib.sh"
S=$SCRATCH
tar -C "$S" -xzf "$TARBALL" || { bad "cannot unpack $TARBALL"; finish; exit 1; }
B=$(echo "$S"/fanstore-*)
PY=python3
echo "glibc $(ldd --version | head -1 | awk '{print $NF}'), $(. /etc/os-release; echo "$PRETTY_NAME"), MPI: $MPI"

# 300 files in nested directories: text, and random bytes from empty to 300 KiB.
$PY - "$S/src" <<'PYEOF'
import os, random, sys
random.seed(7)
root = sys.argv[1]
for i in range(300):
    d = os.path.join(root, "class%02d" % (i % 12), "sub%d" % (i % 3))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%04d.%s" % (i, "txt" if i % 4 == 0 else "bin")), "wb") as f:
        if i % 4 == 0:
            f.write(("line %d of file %d\n" % (i, i) * (i % 50 + 1)).encode())
        else:
            f.write(random.randbytes(random.choice([0, 1, 4096, 70000, 300000]) + i))
PYEOF
# The reader: every file's path and SHA-256, in walk order; to OUT_PREFIX.<rank>.
cat >"$S/reader.py" <<'PYEOF'
import hashlib, os, sys
root, prefix = sys.argv[1], sys.argv[2]
rank = os.environ.get("FANSTORE_RANK", "0")  # (fanrun sets it for CMD)
lines = []
for d, dirs, files in os.walk(root):
    dirs.sort()
    for n in sorted(files):
        p = os.path.join(d, n)
        with open(p, "rb") as f:
            lines.append("%s %s %d\n" % (os.path.relpath(p, root), hashlib.sha256(f.read()).hexdigest(), os.stat(p).st_size))
open("%s.%s" % (prefix, rank), "w").writelines(lines)
PYEOF
$PY "$S/reader.py" "$S/src" "$S/native"
[ "$(wc -l <"$S/native.0")" -eq 300 ] && ok || bad "the native reader saw $(wc -l <"$S/native.0") files"

expect_rc 0 "fanstore pack" -- "$B/bin/fanstore" pack -q --partitions 4 "$S/src" "$S/ds"
expect_rc 0 "fanstore verify" -- "$B/bin/fanstore" verify "$S/ds"
# The source moves away: from here on only FanStore can give those bytes at that path (a
# read that reached the kernel would find nothing there).
mv "$S/src" "$S/src.orig"

# One node: served in place at the source path.
"$B/bin/fanrun" --data "$S/ds" --stats "$S/stats" -- $PY "$S/reader.py" "$S/src" "$S/one" 2>"$S/err" ||
  bad "one-node fanrun: $(head -c 500 "$S/err")"
expect_same "$S/native.0" "$S/one.0" "one-node fanrun, the Python reader"
served=$($PY -c 'import json,sys; print(sum(json.loads(l)["opens"] for l in open(sys.argv[1])))' "$S/stats" 2>/dev/null)
[ "${served:-0}" -ge 300 ] && ok || bad "one-node fanrun served ${served:-no} opens (the reader read the native files?)"
# Coreutils: find | xargs md5sum byte-exact; a write into the mount is EROFS, nothing lands.
(cd "$S/src.orig" && find . -type f | LC_ALL=C sort | xargs md5sum) >"$S/md5.native"
"$B/bin/fanrun" --data "$S/ds" -- bash -c "cd '$S/src' && find . -type f | LC_ALL=C sort | xargs md5sum" \
  >"$S/md5.fan" 2>"$S/err" || bad "fanrun find | xargs md5sum: $(head -c 500 "$S/err")"
expect_same "$S/md5.native" "$S/md5.fan" "one-node fanrun, find | xargs md5sum"
"$B/bin/fanrun" --data "$S/ds" -- bash -c "echo x > '$S/src/class00/new.txt'" 2>"$S/err"
grep -q 'Read-only file system' "$S/err" && [ ! -e "$S/src/class00/new.txt" ] && ok ||
  bad "a write into the mount: $(head -c 300 "$S/err") (expected EROFS)"

# Two ranks under the MPI's own launcher, each staging its share into a local directory.
case $MPI in
  mpich) launch=(mpiexec -n 2) ;;
  openmpi) launch=(mpirun --allow-run-as-root --oversubscribe -n 2) ;;
esac
rm -f "$S/stats"
timeout 300 "${launch[@]}" "$B/bin/fanrun" --data "$S/ds" --local-dir "$S/local" --stats "$S/stats" \
  -- $PY "$S/reader.py" "$S/src" "$S/two" >"$S/out" 2>&1 || bad "${launch[*]} fanrun: $(tail -c 800 "$S/out")"
expect_same "$S/native.0" "$S/two.0" "rank 0 under ${launch[0]}"
expect_same "$S/native.0" "$S/two.1" "rank 1 under ${launch[0]}"
# (each rank holds half of the partitions: the other half came from the other rank over MPI)
remote=$($PY -c 'import json,sys; print(min(sum(json.loads(l)["remote"] for l in open(sys.argv[1]) if json.loads(l)["pid"] == p) for p in {json.loads(l)["pid"] for l in open(sys.argv[1])}))' "$S/stats" 2>/dev/null)
[ "${remote:-0}" -gt 0 ] && ok || bad "two ranks: a rank fetched ${remote:-no} members from the other (expected some, over MPI)"
# fsbench's MPI mode through the same layer: two ranks, each reading half of the files.
timeout 120 "${launch[@]}" "$B/bin/fsbench" "$S/src.orig" --epochs 1 --json >"$S/fsb" 2>"$S/fsb.err" &&
  $PY -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["config"]["ranks"] == 2 and sum(r["items"] for r in d["ranks"]) == 300, d["ranks"]' "$S/fsb" &&
  ok || bad "${launch[0]} fsbench: $(tail -c 600 "$S/fsb" "$S/fsb.err")"
"$B/bin/fanrun" doctor >"$S/doctor" 2>&1
grep -qE "^MPI .*\($MPI: " "$S/doctor" && ok || bad "fanrun doctor does not find $MPI: $(grep ^MPI "$S/doctor")"
finish
