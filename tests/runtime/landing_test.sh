#!/usr/bin/env bash
# One node copying DATA (on FUSE, as a shared file system) while CMD reads: the copy's 2 MiB
# chunks are tracked in the landing map (io/landing.h). A read of a region not landed yet
# asks for its chunk, which the copier takes next, and is served once it has landed (from
# DATA's page cache, where the copier fetched it, or, told to land chunks in the copy, from
# the copy); a second read of a landed region is served without waiting; a copy that lands
# nothing is waited for only so long (the read then goes to DATA); a
# copy that fails midway leaves no partial copy, and every file still reads byte-exact
# from DATA; eight partitions read whole while copied read byte-exact. Each check reads the
# map itself, and the runtime's statistics say where the bytes came from.
# Usage: landing_test.sh FANSTORE FANRUN SOURCE_DIR
FANSTORE=$1
FANRUN=$2
SRCDIR=$3
. "$SRCDIR/tests/bin/lib.sh"
S=$SCRATCH
skip_without_fuse
# 2 partitions of about 12 MiB: 6 chunks each.
/usr/bin/python3 "$SRCDIR/bench/gen_dataset.py" imagenet "$S/src" --files 600 --classes 3 --mean-kb 40 >/dev/null
$FANSTORE pack -q --compress none "$S/src" "$S/packed" --partitions 2 || bad "pack"
fuse_data "$S/packed" "$S/fuse" || { echo "SKIP: squashfuse could not mount here"; exit 77; }
# The member stored last in partition 1 (in its last chunk), and one in partition 0's first.
cat >"$S/probe.py" <<'PY'
# probe.py MODE MNT SRC: MODE late: wait until the copier runs, read the member stored at the
# end of the last partition (not copied yet) twice; MODE fail: wait until the copier has
# stopped, list partial copies, read everything; MODE phases: read everything before the
# copy starts, while it runs, and after it. Prints what it saw.
import glob, os, struct, sys, time
mode, mnt, src = sys.argv[1:4]
rank = os.path.dirname(os.environ["FANSTORE_IMAGE"])
def words():
    b = open(os.path.join(rank, "landing"), "rb").read()
    return struct.unpack("<%dQ" % (len(b) // 8), b)
def landed(w, p, c):
    slot = 6 + 4 * p  # (the map's head is 6 words: io/landing.h)
    return (w[w[slot + 2] + c // 64] >> (c % 64)) & 1
def same(rel):
    return open(os.path.join(mnt, rel), "rb").read() == open(os.path.join(src, rel), "rb").read()
deadline = time.time() + 120
if mode == "late":
    while not words()[2] and time.time() < deadline: time.sleep(0.01)
    w = words()
    chunks = w[6 + 4 * 1 + 1]
    print("before", landed(w, 1, chunks - 1), "from_data", w[5], flush=True)
    rel = sys.argv[4]
    print("read", same(rel), same(rel), flush=True)
elif mode == "phases":  # everything before the copy starts, while it runs, and after
    bad = 0
    for phase in range(3):
        if phase == 1:
            while not words()[2] and time.time() < deadline: time.sleep(0.005)
        if phase == 2:
            while words()[2] and time.time() < deadline: time.sleep(0.01)
            time.sleep(0.3)  # (a process looks for finished copies every 200 ms)
        for root, _, files in os.walk(src):
            for f in files:
                bad += not same(os.path.relpath(os.path.join(root, f), src))
    print("bad", bad, flush=True)
else:
    if mode == "fail":
        while (not os.path.exists(os.path.join(rank, "landing")) or words()[2] == 0) and time.time() < deadline:
            time.sleep(0.01)
        while words()[2] and time.time() < deadline: time.sleep(0.01)
        print("partial", len(glob.glob(os.path.join(rank, "*.staging"))), flush=True)
    bad = 0
    for root, _, files in os.walk(src):
        for f in files:
            rel = os.path.relpath(os.path.join(root, f), src)
            bad += not same(rel)
    print("bad", bad, flush=True)
PY
stat_of() { /usr/bin/python3 -c "import json,sys; print(sum(json.loads(l)['$1'] for l in open(sys.argv[1])))" "$2"; }

# 1. A region not landed yet: the read asks for its chunk, waits, and is served once it has
# landed: from DATA's page cache (squashfuse keeps it), and told to land chunks in the copy,
# from the copy. (the member at the highest offset of partition 1: `fanstore stat` gives
# partition and offset)
best=""; best_off=-1
for rel in $(cd "$S/src" && find . -type f | sed 's|^\./||'); do
  line=$($FANSTORE stat "$S/packed" "$rel" | awk '/Partition/ {p=$2} /Offset/ {o=$2} END {print p, o}')
  p=${line% *}; o=${line#* }
  if [ "$p" = part-00001.fsb ] && [ "$o" -gt "$best_off" ]; then best=$rel; best_off=$o; fi
done
[ -n "$best" ] && ok || bad "fanstore stat names the last member of partition 1"
for where in data copy; do
  if [ $where = data ]; then unset FANSTORE_TEST_LAND_IN_COPY; else export FANSTORE_TEST_LAND_IN_COPY=1; fi
  FANSTORE_TEST_CHUNK_DELAY_MS=200 "$FANRUN" --stats "$S/stats1$where" --data "$S/fuse" --mount "$S/mnt" -- \
    /usr/bin/python3 "$S/probe.py" late "$S/mnt" "$S/src" "$best" >"$S/out1" 2>"$S/err1"
  want=$([ $where = data ] && echo 1 || echo 0)
  grep -qx "before 0 from_data $want" "$S/out1" && ok ||
    bad "($where) the region was not landed when read, and landed chunks are read from $where: $(cat "$S/out1" "$S/err1")"
  grep -qx "read True True" "$S/out1" && ok || bad "($where) it reads byte-exact, twice: $(cat "$S/out1" "$S/err1")"
  [ "$(stat_of landing_waits "$S/stats1$where")" = 1 ] && ok ||
    bad "($where) the first read waited for its chunk, the second did not: $(cat "$S/stats1$where")"
  [ "$(stat_of landed_reads "$S/stats1$where")" -ge 2 ] && ok ||
    bad "($where) both reads were served as landed: $(cat "$S/stats1$where")"
done
unset FANSTORE_TEST_LAND_IN_COPY
[ "$(stat_of landing_gave_up "$S/stats1data")" = 0 ] && ok ||
  bad "a copy that lands chunks is waited for: $(cat "$S/stats1data")"

# 1b. A copy that lands nothing (every chunk held back 10 minutes; the hold ends when CMD
# does): the read waits while nothing lands for io::kLandingWaitNs (2 s), then reads DATA
# itself, byte-exact, and --stats says so.
FANSTORE_TEST_CHUNK_DELAY_MS=600000 "$FANRUN" --stats "$S/stats1stuck" --data "$S/fuse" --mount "$S/mnt" -- \
  /usr/bin/python3 "$S/probe.py" late "$S/mnt" "$S/src" "$best" >"$S/out1" 2>"$S/err1"
grep -qx "read True True" "$S/out1" && ok || bad "(stuck) it reads byte-exact from DATA: $(cat "$S/out1" "$S/err1")"
[ "$(stat_of landing_gave_up "$S/stats1stuck")" -ge 1 ] && ok ||
  bad "(stuck) the read gave up on the copy: $(cat "$S/stats1stuck")"

# 2. A copy that fails midway (after 2 chunks): no partial copy is left, every file reads
# byte-exact (from DATA), and the failure is said.
FANSTORE_TEST_CHUNK_DELAY_MS=50 FANSTORE_TEST_COPY_FAIL_AFTER=2 "$FANRUN" --data "$S/fuse" --mount "$S/mnt" -- \
  /usr/bin/python3 "$S/probe.py" fail "$S/mnt" "$S/src" >"$S/out2" 2>"$S/err2"
grep -qx "partial 0" "$S/out2" && ok || bad "no partial copy is left: $(cat "$S/out2" "$S/err2")"
grep -qx "bad 0" "$S/out2" && ok || bad "every file reads byte-exact after the failure: $(cat "$S/out2" "$S/err2")"
grep -q "^fanrun: staging stopped, the rest is read in place from DATA: .*copy failed" "$S/err2" && ok ||
  bad "the failure is said: $(cat "$S/err2")"
# 3. Eight partitions read whole before, while and after they are copied: the process then
# holds the in-place blob, the copy being made and the finished copy of each, all in the runtime's own range
# of descriptors (a range sized for one per partition ran out: EMFILE on a read).
$FANSTORE pack -q --compress none "$S/src" "$S/eight" --partitions 8 || bad "pack in 8"
fuse_data "$S/eight" "$S/fuse8" || bad "squashfuse of the 8 partitions"
FANSTORE_TEST_COPY_DELAY_MS=500 FANSTORE_TEST_CHUNK_DELAY_MS=100 "$FANRUN" --data "$S/fuse8" --mount "$S/mnt" -- \
  /usr/bin/python3 "$S/probe.py" phases "$S/mnt" "$S/src" >"$S/out3" 2>"$S/err3"
grep -qx "bad 0" "$S/out3" && ok || bad "eight partitions read while copied: $(cat "$S/out3" "$S/err3" | tail -5)"
finish
