#!/usr/bin/env bash
# One node stages from a shared file system while the command runs: DATA packed, put in a
# squashfs image and mounted with squashfuse (a FUSE file system, as MooseFS, JuiceFS or
# sshfs are). fanrun copies the partitions to local storage while CMD reads: with the copy
# held back, every file is read byte-exact from DATA in place; once the copy is there the
# same process reads it from the local copy (its blob fds say so); nothing is left behind.
# DATA on a local file system is served in place; --no-stage and --stage override.
# Without io_uring (refused by a seccomp filter, as on RHEL 8's kernel) the copy is made
# with plain reads and writes; without huge pages for tmpfs (MADV_COLLAPSE refused) the copy
# is made in 4 KiB pages, and fanrun and doctor say so. DATA on a local disk that fits in
# memory is read into the page cache in huge folios while CMD runs.
# Usage: stage_test.sh FANSTORE FANRUN SOURCE_DIR KERNEL_REFUSES
FANSTORE=$1
FANRUN=$2
SRCDIR=$3
KERNEL_REFUSES=$4
. "$SRCDIR/tests/bin/lib.sh"
S=$SCRATCH
# (one node's own copy of a local DATA starts once CMD has run 10 s; here at once, but in
# part 3, which checks the default)
export FANSTORE_COPY_AFTER=0
skip_without_fuse
/usr/bin/python3 "$SRCDIR/bench/gen_dataset.py" imagenet "$S/src" --files 300 --classes 3 --mean-kb 12 >/dev/null
$FANSTORE pack -q "$S/src" "$S/packed" --partitions 3 || bad "pack"
fuse_data "$S/packed" "$S/fuse" || { echo "SKIP: squashfuse could not mount here"; exit 77; }
# (DATA on a FUSE file system is what makes one node stage without being asked)
case $(stat -f -c %T "$S/fuse") in fuse | fuseblk) ok ;; *) bad "squashfuse's mount reports $(stat -f -c %T "$S/fuse"), not fuse" ;; esac

cat >"$S/reader.py" <<'PY'
# Reads every file under the mount and compares it with the source; then waits for the
# staged copy and reads everything again. Prints where its blob fds pointed each time.
import hashlib, os, sys, time
mnt, src, data = sys.argv[1], sys.argv[2], sys.argv[3]
def blobs():
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            t = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            continue
        if os.path.basename(t).startswith("part-") and t.endswith(".fsb"):
            out.add("data" if t.startswith(data + "/") else "local")
    return sorted(out)
def read_all():
    bad = 0
    for root, _, files in os.walk(src):
        for f in files:
            rel = os.path.relpath(os.path.join(root, f), src)
            if open(os.path.join(mnt, rel), "rb").read() != open(os.path.join(src, rel), "rb").read():
                bad += 1
    return bad
print("first", read_all(), ",".join(blobs()), flush=True)
deadline = time.time() + 60
while time.time() < deadline:
    time.sleep(0.3)
    bad = read_all()
    if "local" in blobs():
        break
print("then", bad, ",".join(blobs()), flush=True)
# The command's end cancels a copy still running (one partition may be local before the
# others are): wait for the whole copy, whose end fanrun says (its job directory's
# staging-from goes away then), so that the line is there to check.
import glob
pattern = "/dev/shm/fanstore-%d/job-*/rank-*/staging-from" % os.getuid()
while time.time() < deadline and glob.glob(pattern):
    time.sleep(0.1)
PY

# 1. DATA on FUSE: copied while the command runs.
FANSTORE_TEST_COPY_DELAY_MS=5000 "$FANRUN" --verbose --data "$S/fuse" --mount "$S/mnt" -- \
  /usr/bin/python3 "$S/reader.py" "$S/mnt" "$S/src" "$S/fuse" >"$S/out" 2>"$S/err"
rc=$?
[ $rc -eq 0 ] && ok || bad "fanrun on FUSE DATA: exit $rc: $(tail -3 "$S/err")"
grep -q "^fanrun: copying .* of DATA to .* while the command runs; reads take their 2 MiB chunks as they land, asking for the ones they wait for (DATA is on FUSE)$" "$S/err" &&
  ok || bad "the start-up line says it copies, and why: $(cat "$S/err")"
grep -q "^first 0 data$" "$S/out" && ok || bad "reads before the copy: byte-exact, from DATA: $(cat "$S/out")"
grep -q "^then 0 data,local$\|^then 0 local$" "$S/out" && ok ||
  bad "reads after the copy: byte-exact, from the local copy: $(cat "$S/out")"
grep -q "^fanrun: staged .* reads now go to /dev/shm/" "$S/err" && ok || bad "the end of the copy is said: $(cat "$S/err")"
# (this job's directory, named on its start-up line: other tests' jobs may be running)
jobdir=$(sed -n 's|^fanrun: copying .* of DATA to \(/dev/shm/[^ ]*/job-[^/ ]*\)/.*|\1|p' "$S/err")
[ -n "$jobdir" ] && [ ! -e "$jobdir" ] && ok || bad "the job's directory '$jobdir' was left behind"

# 2. --no-stage on FUSE: in place, said so.
"$FANRUN" -v --no-stage --data "$S/fuse" --mount "$S/mnt" -- cat "$S/mnt/$(cd "$S/src" && find . -type f | head -1)" \
  >"$S/one" 2>"$S/err" && ok || bad "--no-stage run failed: $(cat "$S/err")"
grep -qx "fanrun: serving DATA in place (--no-stage)" "$S/err" && ok || bad "--no-stage is said: $(cat "$S/err")"

# 3. DATA on a local file system: copied to /dev/shm while CMD runs where the node makes
# shmem huge pages (fanrun doctor says whether), on the time CMD leaves idle, said under
# --verbose, the copy read; without --verbose nothing is said; else in place and silent.
# --no-stage: in place and silent; --stage copies it anyway.
if "$FANRUN" doctor 2>&1 | grep -q "staged copies in huge pages"; then
  "$FANRUN" --data "$S/packed" --mount "$S/mnt" -- \
    /usr/bin/python3 "$S/reader.py" "$S/mnt" "$S/src" "$S/packed" >"$S/out" 2>"$S/err"
  [ ! -s "$S/err" ] && grep -q "^then 0 .*local" "$S/out" && ok ||
    bad "local DATA is copied, silently, and the copy read: $(cat "$S/err" "$S/out")"
  # (by default the copy waits until CMD has run 10 s: a short job never pays for it)
  env -u FANSTORE_COPY_AFTER "$FANRUN" -v --data "$S/packed" --mount "$S/mnt" -- \
    sh -c 'sleep 1; [ -e "$(dirname "$FANSTORE_IMAGE")/staging-from" ] && echo waiting' >"$S/out" 2>"$S/err"
  grep -q "^fanrun: copying .* of DATA to /dev/shm/.* while the command runs, once it has run 10 s, on the CPU and disk time it leaves idle;" "$S/err" &&
    grep -qx waiting "$S/out" && ok || bad "the default copy waits 10 s, and says so: $(cat "$S/err" "$S/out")"
  "$FANRUN" --verbose --data "$S/packed" --mount "$S/mnt" -- \
    /usr/bin/python3 "$S/reader.py" "$S/mnt" "$S/src" "$S/packed" >"$S/out" 2>"$S/err"
  grep -q "^fanrun: copying .* of DATA to /dev/shm/.* while the command runs, on the CPU and disk time it leaves idle; reads go to DATA until each partition is copied (DATA is on a local file system (.*), and a copy in huge pages in /dev/shm reads faster than its page cache (--no-stage: in place))$" "$S/err" &&
    grep -q "^then 0 .*local" "$S/out" && ok ||
    bad "local DATA is copied to huge pages, said, and the copy read: $(cat "$S/err" "$S/out")"
else
  "$FANRUN" --data "$S/packed" --mount "$S/mnt" -- true 2>"$S/err" && [ ! -s "$S/err" ] && ok ||
    bad "local DATA without shmem huge pages: in place and silent: $(cat "$S/err")"
fi
"$FANRUN" --no-stage --data "$S/packed" --mount "$S/mnt" -- true 2>"$S/err" && [ ! -s "$S/err" ] && ok ||
  bad "local DATA with --no-stage: in place and silent: $(cat "$S/err")"
"$KERNEL_REFUSES" collapse "$FANRUN" --data "$S/packed" --mount "$S/mnt" -- true 2>"$S/err" &&
  [ ! -s "$S/err" ] && ok ||
  bad "local DATA where the kernel makes no shmem huge pages: in place and silent: $(cat "$S/err")"
"$FANRUN" -v --stage --data "$S/packed" --mount "$S/mnt" -- \
  /usr/bin/python3 "$S/reader.py" "$S/mnt" "$S/src" "$S/packed" >"$S/out" 2>"$S/err"
grep -q "(--stage)$" "$S/err" && grep -q "^then 0 .*local" "$S/out" && ok ||
  bad "--stage copies local DATA and reads the copy: $(cat "$S/err" "$S/out")"
expect_rc 2 "--stage with --no-stage" -- "$FANRUN" --stage --no-stage --data "$S/packed" -- true
grep -q "excludes" "$SCRATCH/err" && ok || bad "--stage with --no-stage is refused: $(cat "$SCRATCH/err")"

# 3b. The memory rule counts the job's memory cgroup, where a copy in /dev/shm is charged: a
# 40 MiB share in a cgroup limited to 64 MiB is served in place, silently. (Root, and a
# memory controller to make a cgroup with: v2's or v1's.)
cg=""
if [ "$(id -u)" = 0 ] && grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null &&
  mkdir "/sys/fs/cgroup/fanstore-test-$$" 2>/dev/null; then
  cg=/sys/fs/cgroup/fanstore-test-$$
  echo $((64 << 20)) >"$cg/memory.max" || cg=""
elif [ "$(id -u)" = 0 ] && [ -d /sys/fs/cgroup/memory ] &&
  mkdir "/sys/fs/cgroup/memory/fanstore-test-$$" 2>/dev/null; then
  cg=/sys/fs/cgroup/memory/fanstore-test-$$
  echo $((64 << 20)) >"$cg/memory.limit_in_bytes" || cg=""
fi
if [ -z "$cg" ] || ! "$FANRUN" doctor 2>&1 | grep -q "staged copies in huge pages"; then
  skip "part 3b: no memory cgroup to make here (root and a memory controller), or no shmem huge pages"
else
  mkdir -p "$S/cgsrc" && head -c $((40 << 20)) /dev/urandom >"$S/cgsrc/big.bin" &&
    $FANSTORE pack -q "$S/cgsrc" "$S/cgpacked" || bad "pack for the cgroup"
  "$FANRUN" -v --data "$S/cgpacked" --mount "$S/mnt" -- true 2>"$S/err" && grep -q "^fanrun: copying" "$S/err" && ok ||
    bad "a 40 MiB share outside the cgroup is copied: $(cat "$S/err")"
  sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$cg" \
    "$FANRUN" --data "$S/cgpacked" --mount "$S/mnt" -- true 2>"$S/err" && [ ! -s "$S/err" ] && ok ||
    bad "a 40 MiB share in a 64 MiB cgroup is served in place, silently: $(cat "$S/err")"
  # (DATA on FUSE: its copy in /dev/shm would take over half of what the job may use, so it
  # goes to a local disk, $TMPDIR, where the scratch directory is on one; read from there)
  if [ "$(stat -f -c %T "$S")" = tmpfs ]; then
    skip "part 3b: the scratch directory is on tmpfs, no local disk to copy to"
  elif fuse_data "$S/cgpacked" "$S/cgfuse"; then
    mkdir -p "$S/disk"
    sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$cg" env TMPDIR="$S/disk" \
      "$FANRUN" -v --data "$S/cgfuse" --mount "$S/mnt" -- \
      sh -c 'i=0; while [ -e "$(dirname "$FANSTORE_IMAGE")/staging-from" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; cmp "$1" "$2" && ls "$3"' \
      sh "$S/mnt/big.bin" "$S/cgsrc/big.bin" "$S/disk" >"$S/out" 2>"$S/err"
    grep -q "^fanrun: copying 40\.[0-9] MiB of DATA to $S/disk/fanstore-.* while the command runs; .*(DATA is on FUSE; a copy of 40\.[0-9] MiB in /dev/shm would take over half of the .* of memory this job may use, so the copy goes to $S/disk, a local disk)$" "$S/err" &&
      grep -q "^fanstore-" "$S/out" && [ -z "$(ls "$S/disk")" ] && ok ||
      bad "DATA on FUSE whose copy would not fit the job's cgroup goes to a local disk, read byte-exact, removed at the end: $(cat "$S/err" "$S/out")"
  fi
  sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$cg" "$FANRUN" doctor >"$S/doctor" 2>&1
  grep -q "^memory    .* available, .* left in this job's memory cgroup; a local DATA share up to .* is copied" "$S/doctor" &&
    ok || bad "doctor names the job's memory cgroup: $(grep '^memory' "$S/doctor")"
  rmdir "$cg" 2>/dev/null || true
fi

# 4. Under a launcher, DATA on a shared file system: each node reads its share once and
# checks every member before the command starts (a damaged one stops every rank then,
# named), and its copy is made while the command runs; reads are byte-exact throughout, and
# from the copy once it is made. One rank (its clean-up covers the copy; --local-dir left
# as it was found), two ranks (each its share, every file read by each), a damaged member,
# and a copy that fails midway (the partitions not copied are read in place from DATA).
if [ -n "${FANSTORE_TEST_SKIP_MPI:-}" ]; then
  skip "part 4: $FANSTORE_TEST_SKIP_MPI"
elif command -v mpiexec >/dev/null; then
  mkdir -p "$S/local"
  timeout -k 10 120 mpiexec -n 1 "$FANRUN" --verbose --local-dir "$S/local" --data "$S/fuse" --mount "$S/mnt" -- \
    /usr/bin/python3 "$S/reader.py" "$S/mnt" "$S/src" "$S/fuse" >"$S/out" 2>"$S/err"
  rc=$?
  [ $rc -eq 0 ] && ok || bad "mpiexec -n 1 fanrun on FUSE DATA: exit $rc: $(tail -3 "$S/err")"
  grep -qx "fanrun: reading DATA once and checking it before the command starts; the copy in $S/local/fanstore-.* is made while the command runs (--local-dir)" "$S/err" &&
    grep -q "^fanrun: 1 node ready in .*: read and checked 3\.[0-9] MiB in .*, copied while the command runs;" "$S/err" && ok ||
    bad "one rank under a launcher reads and checks DATA first, and says so: $(cat "$S/err")"
  grep -q "^first 0 " "$S/out" && grep -q "^then 0 data,local$\|^then 0 local$" "$S/out" && ok ||
    bad "one rank: every read byte-exact, from the copy once made: $(cat "$S/out")"
  [ -z "$(ls -A "$S/local")" ] && ok || bad "one rank: --local-dir left with $(ls -A "$S/local")"

  printf '#!/bin/sh\nexec /usr/bin/python3 %s %s %s %s >%s/out.$FANSTORE_RANK\n' \
    "$S/reader.py" "$S/mnt" "$S/src" "$S/fuse" "$S" >"$S/ranks.sh"
  chmod +x "$S/ranks.sh"
  # two_ranks WHAT [VAR=VALUE...]: two ranks on the FUSE DATA, each reading every file; checks
  # the exit status and each rank's bytes, and leaves fanrun's lines in $S/err.
  two_ranks() {
    local what=$1
    shift
    rm -f "$S"/out.*
    env "$@" timeout -k 10 120 mpiexec -n 2 "$FANRUN" ${TWO_RANKS_VERBOSE:+--verbose} --data "$S/fuse" --mount "$S/mnt" -- \
      "$S/ranks.sh" >"$S/out" 2>"$S/err"
    local rc=$?
    [ $rc -eq 0 ] && ok || bad "$what: exit $rc: $(tail -3 "$S/err")"
    for r in 0 1; do
      grep -q "^first 0 " "$S/out.$r" 2>/dev/null && grep -q "^then 0 " "$S/out.$r" && ok ||
        bad "$what: rank $r reads every file byte-exact: $(cat "$S/out.$r" 2>/dev/null)"
    done
  }
  two_ranks "two ranks on FUSE DATA"
  # (by default: one line, rank 0's, how fast the job was ready)
  [ "$(wc -l <"$S/err")" = 1 ] && grep -q "^fanrun: 2 nodes ready in .*: read and checked 3\.[0-9] MiB in " "$S/err" &&
    ok || bad "two ranks say one line by default: $(cat "$S/err")"
  TWO_RANKS_VERBOSE=1 two_ranks "two ranks on FUSE DATA, --verbose"
  [ "$(grep -c "^fanrun: each node reads its share of DATA once and checks it before the command starts; its copy in /dev/shm/.* is made while the command runs (2 nodes)$" "$S/err")" = 1 ] &&
    grep -q "^fanrun: 2 nodes ready in .*: read and checked 3\.[0-9] MiB in " "$S/err" && ok ||
    bad "two ranks read and check their shares first, said once: $(cat "$S/err")"

  # One member damaged in DATA (its partition's index and footer intact): a JPEG, stored raw.
  rel=$(cd "$S/src" && find train -name '*.JPEG' -size +8k | sort | head -1)
  info=$($FANSTORE stat "$S/packed" "$rel")
  part=$(echo "$info" | sed -n 's/.*Partition: \(part-[0-9]*\.fsb\)/\1/p')
  off=$(echo "$info" | sed -n 's/.*Offset: \([0-9]*\)/\1/p')
  rm -rf "$S/rot" && cp -r "$S/packed" "$S/rot"
  /usr/bin/python3 -c "import sys; f=open(sys.argv[1],'r+b'); f.seek(int(sys.argv[2])+1000); b=f.read(1); f.seek(-1,1); f.write(bytes([b[0]^0x5a]))" "$S/rot/$part" "$off"
  if fuse_data "$S/rot" "$S/rotfuse"; then
    rm -f "$S/cmd-ran"
    timeout -k 10 120 mpiexec -n 2 "$FANRUN" --data "$S/rotfuse" --mount "$S/mnt" -- touch "$S/cmd-ran" >"$S/out" 2>"$S/err"
    rc=$?
    [ $rc -eq 125 ] && [ ! -e "$S/cmd-ran" ] && ok ||
      bad "a damaged member in FUSE DATA, two ranks: exit $rc, CMD ran: $([ -e "$S/cmd-ran" ] && echo yes || echo no)"
    grep -q "rank [01] (.*$part: member '$rel': checksum mismatch (damaged data" "$S/err" && ok ||
      bad "a damaged member in FUSE DATA: not named before CMD: $(cat "$S/err")"
  else
    skip "a damaged member in FUSE DATA: squashfuse could not mount it"
  fi

  # The copy fails after its first chunk: the job goes on, reading in place what was not
  # copied, every byte right, and says so.
  two_ranks "a copy failing midway, two ranks" FANSTORE_TEST_COPY_FAIL_AFTER=1
  grep -q "staging stopped, the rest is read in place from DATA: .*copy failed (FANSTORE_TEST_COPY_FAIL_AFTER)" "$S/err" && ok ||
    bad "a copy failing midway: not said: $(cat "$S/err")"
else
  skip "part 4: mpiexec not installed"
fi

# 5. io_uring refused by the kernel: the filter works (doctor sees it), and --stage still
# copies, read byte-exact from the copy.
"$KERNEL_REFUSES" io_uring "$FANRUN" doctor >"$S/doctor" 2>&1
grep -q "io_uring unavailable: " "$S/doctor" && ok || bad "under kernel_refuses io_uring, io_uring still works: $(grep io_uring "$S/doctor")"
"$KERNEL_REFUSES" io_uring "$FANRUN" -v --stage --data "$S/packed" --mount "$S/mnt" -- \
  /usr/bin/python3 "$S/reader.py" "$S/mnt" "$S/src" "$S/packed" >"$S/out" 2>"$S/err"
grep -q "(--stage)$" "$S/err" && grep -q "^then 0 .*local" "$S/out" && ! grep -q "io_uring" "$S/err" && ok ||
  bad "--stage without io_uring copies and reads the copy: $(cat "$S/err" "$S/out")"

# 6. A copy staged on tmpfs is made of huge pages (io/stage.cc, MADV_COLLAPSE): with one
# partition of 3.5 MiB, at least one 2 MiB extent is, while the job runs.
if [ -e /sys/kernel/mm/transparent_hugepage/shmem_enabled ]; then
  $FANSTORE pack -q "$S/src" "$S/single" --partitions 1 2>"$S/err" || bad "pack into one partition: $(cat "$S/err")"
  before=$(awk '/^ShmemHugePages:/ {print $2}' /proc/meminfo)
  "$FANRUN" --stage --data "$S/single" --mount "$S/mnt" -- sh -c \
    'i=0; while [ -e "$(dirname "$FANSTORE_IMAGE")/staging-from" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; awk "/^ShmemHugePages:/ {print \$2}" /proc/meminfo' \
    >"$S/huge" 2>"$S/err"
  during=$(cat "$S/huge")
  [ -n "$during" ] && [ "$during" -ge $((before + 2048)) ] && ok ||
    bad "the staged copy is huge pages: ShmemHugePages $before kB before, ${during:-?} kB while staged: $(cat "$S/err")"
else
  skip "part 5: no transparent huge pages in this kernel"
fi

# 7. Where the kernel makes no huge pages of a tmpfs copy (MADV_COLLAPSE refused, as before
# Linux 6.1 or with shmem huge pages denied): doctor says so, the copy is made all the
# same, said to be in 4 KiB pages, and read byte-exact. The pages line names the node's
# transparent huge page settings as sysfs has them.
"$FANRUN" doctor >"$S/doctor" 2>&1
thp=$(sed 's/.*\[\(.*\)\].*/\1/' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo unknown)
shmem=$(sed 's/.*\[\(.*\)\].*/\1/' /sys/kernel/mm/transparent_hugepage/shmem_enabled 2>/dev/null || echo unknown)
page=$(($(getconf PAGESIZE) / 1024))
grep -q "^pages     $page KiB, transparent huge pages $thp, shmem $shmem; staged copies in " "$S/doctor" && ok ||
  bad "doctor names the node's page settings ($page KiB, $thp, $shmem): $(grep '^pages' "$S/doctor")"
grep -q "^memory    [0-9.]* [KMGT]iB available" "$S/doctor" && ok ||
  bad "doctor says the memory copies may take: $(grep '^memory' "$S/doctor")"
"$KERNEL_REFUSES" collapse "$FANRUN" doctor >"$S/doctor" 2>&1
grep -q "^pages .*staged copies in $page KiB pages: the kernel has no MADV_COLLAPSE" "$S/doctor" && ok ||
  bad "doctor says when staged copies cannot be huge pages: $(grep '^pages' "$S/doctor")"
# (one partition of 3.5 MiB, as in part 6; CMD waits for the whole copy, whose lines are
# said before its staging-from file goes)
[ -f "$S/single/manifest" ] || $FANSTORE pack -q "$S/src" "$S/single" --partitions 1
"$KERNEL_REFUSES" collapse "$FANRUN" --stage --data "$S/single" --mount "$S/mnt" -- sh -c \
  'i=0; while [ -e "$(dirname "$FANSTORE_IMAGE")/staging-from" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; exec "$@"' \
  sh /usr/bin/python3 "$S/reader.py" "$S/mnt" "$S/src" "$S/single" >"$S/out" 2>"$S/err"
grep -q "in $page KiB pages.*(the kernel has no MADV_COLLAPSE" "$S/err" &&
  grep -q "^then 0 .*local" "$S/out" && ok ||
  bad "--stage without huge pages copies, says so, and reads the copy: $(cat "$S/err" "$S/out")"

# 8. DATA served in place from a local file system (--no-stage), with the share fitting in
# half of the free memory, is read into the page cache in huge folios while CMD runs
# (io/warm.h), silently. Counted by
# FileHugePages after the page cache is dropped, where a probe shows that this kernel and
# file system make huge folios for such a mapping at all.
huge_kb() { awk '/^FileHugePages:/ {print $2}' /proc/meminfo; }
head -c $((24 << 20)) /dev/urandom >"$S/probe.bin"
probe_huge() {  # the kB of huge folios a MADV_HUGEPAGE mapping of probe.bin brings in
  sync && echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || return 1
  local before
  before=$(huge_kb)
  /usr/bin/python3 -c "
import mmap, sys
f = open(sys.argv[1], 'rb')
m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
m.madvise(mmap.MADV_HUGEPAGE); m.madvise(mmap.MADV_RANDOM); m.madvise(22)  # POPULATE_READ
" "$S/probe.bin" 2>/dev/null || return 1
  echo $(($(huge_kb) - before))
}
probe=$(probe_huge || echo none)
if [ -z "$(huge_kb)" ] || [ "$probe" = none ] || [ "$probe" -lt 8192 ]; then
  skip "part 8: this kernel or file system makes no huge page-cache folios (probe: ${probe:-?} kB), or the cache cannot be dropped"
else
  mkdir -p "$S/warmsrc" && cp -r "$S/src/." "$S/probe.bin" "$S/warmsrc/" &&
    $FANSTORE pack -q "$S/warmsrc" "$S/warm" --partitions 1 || bad "pack for the warm"
  sync && echo 3 >/proc/sys/vm/drop_caches
  before=$(huge_kb)
  "$FANRUN" --no-stage --data "$S/warm" --mount "$S/mnt" -- sh -c \
    'i=0; while [ -e "$(dirname "$FANSTORE_IMAGE")/warming" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; awk "/^FileHugePages:/ {print \$2}" /proc/meminfo' \
    >"$S/huge" 2>"$S/err"
  during=$(cat "$S/huge")
  # (28 MiB of blob; fanrun's read calibration caches its first 8 MiB in small folios)
  [ -n "$during" ] && [ "$during" -ge $((before + 8192)) ] && ok ||
    bad "in-place DATA is warmed in huge folios: FileHugePages $before kB before, ${during:-?} kB after: $(cat "$S/err")"
  [ ! -s "$S/err" ] && ok || bad "in-place DATA stays silent while warmed: $(cat "$S/err")"
fi

# 8b. A FANSTORE_COPY_AFTER that is not a number of seconds stops fanrun with one line.
expect_rc 125 "FANSTORE_COPY_AFTER=soon" -- env FANSTORE_COPY_AFTER=soon "$FANRUN" --data "$S/packed" --mount "$S/mnt" -- true
expect_err_line "FANSTORE_COPY_AFTER: 'soon' is not a number of seconds" "a bad FANSTORE_COPY_AFTER is named"

# 9. The copy of a local DATA yields to CMD (io/yield.h): while CMD keeps every core busy,
# the copier (SCHED_IDLE) completes no partition and fanrun takes next to no CPU, and
# readers do not wait for it; once CMD leaves the cores idle, the copy ends and its bytes
# are right. Counted, not timed: the partitions the landing map says are complete (its
# per-partition state words, io/landing.h) and fanrun's CPU ticks (/proc/PID/stat), before
# and after 2 s of busy cores. 256 MiB from DATA's page cache takes 0.4 s of a core here.
mkdir -p "$S/yieldsrc"
for i in 1 2 3 4; do head -c $((64 << 20)) /dev/urandom >"$S/yieldsrc/f$i.bin"; done
$FANSTORE pack -q "$S/yieldsrc" "$S/yield" --partitions 2 || bad "pack for the yield"
cat "$S/yield"/part-*.fsb >/dev/null  # (DATA's page cache warm: the copier is CPU-bound)
cat >"$S/copied.py" <<'PY'
# "DONE PARTS TICKS": partitions whose copy is complete, partitions, and fanrun's CPU ticks.
import struct, sys
w = open(sys.argv[1], "rb").read()
words = struct.unpack("<%dQ" % (len(w) // 8), w)
parts = words[1]
done = sum(1 for p in range(parts) if words[6 + 4 * p] >> 32 == 1)
stat = open("/proc/%s/stat" % sys.argv[2]).read().rsplit(")", 1)[1].split()
print(done, parts, int(stat[11]) + int(stat[12]))
PY
cat >"$S/busy.sh" <<'SH'
map=$(dirname "$FANSTORE_IMAGE")/landing
pids=""
for i in $(seq "$(nproc)"); do sh -c 'while :; do :; done' & pids="$pids $!"; done
sleep 1.5
before=$(/usr/bin/python3 "$1" "$map" "$PPID")
sleep 2
during=$(/usr/bin/python3 "$1" "$map" "$PPID")
kill $pids
i=0; while [ -e "$(dirname "$FANSTORE_IMAGE")/staging-from" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
[ -e "$(dirname "$FANSTORE_IMAGE")/staging-from" ] && echo "copy still running" || echo "copy done"
echo "before $before"
echo "during $during"
cmp "$2/f3.bin" "$3/f3.bin" && echo "bytes right"
SH
# (the copy held back 1 s, so that it starts on a core CMD already keeps busy; CMD's parent
# is fanrun. The job is pinned to one CPU, which CMD's loop keeps busy whatever else runs
# on the machine: on several, another test's load left a CPU to the copier at moments, as
# the scheduler balanced, and it finished a partition within the 2 s.)
FANSTORE_TEST_COPY_DELAY_MS=1000 taskset -c 0 "$FANRUN" --stage --data "$S/yield" --mount "$S/mnt" -- \
  sh "$S/busy.sh" "$S/copied.py" "$S/mnt" "$S/yieldsrc" >"$S/out" 2>"$S/err"
read -r _ done_before parts ticks_before < <(grep '^before ' "$S/out")
read -r _ done_during _ ticks_during < <(grep '^during ' "$S/out")
if [ -z "$parts" ] || [ -z "$ticks_during" ]; then
  bad "the yield run printed no counts: $(cat "$S/out" "$S/err")"
else
  # (SCHED_IDLE gets a few ms in 2 s beside a busy loop on its CPU; copying a partition of
  # 128 MiB from the page cache takes over 50 ms of CPU)
  [ "$done_before" = 0 ] && [ "$done_during" = 0 ] && [ $((ticks_during - ticks_before)) -le 20 ] && ok ||
    bad "while CMD kept every core busy the copier completed $done_before then $done_during of $parts partitions, and fanrun took $((ticks_during - ticks_before)) ticks"
fi
grep -q "^copy done$" "$S/out" && grep -q "^bytes right$" "$S/out" && ok ||
  bad "the copy ends once CMD leaves the cores idle, byte-exact: $(cat "$S/out" "$S/err")"
# Readers do not wait for that copy: with every chunk of it slowed (500 ms each), a whole
# file is read byte-exact from DATA in place, no read waiting for a chunk (--stats'
# landing_waits; from a shared file system, part 1, reads wait for theirs).
FANSTORE_TEST_CHUNK_DELAY_MS=500 "$FANRUN" --stage --stats --data "$S/yield" --mount "$S/mnt" -- \
  sh -c 'cmp "$1" "$2" && echo "bytes right"' sh "$S/mnt/f2.bin" "$S/yieldsrc/f2.bin" >"$S/out" 2>"$S/err"
waits=$(grep -o '"landing_waits": *[0-9]*' "$S/err" | awk -F: '{n += $2} END {print n + 0}')
grep -qx "bytes right" "$S/out" && [ "$waits" = 0 ] && grep -q '"landing_waits"' "$S/err" && ok ||
  bad "reads beside a slow local copy go to DATA without waiting: $waits waits: $(cat "$S/out") $(head -c 300 "$S/err")"
finish
