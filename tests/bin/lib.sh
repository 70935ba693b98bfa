# Shared helpers for the shell-level tests: a scratch dir, assertions that name the check,
# and a closing "N passed, N failed" line. Source it, then call `finish` at the end.
set -u
PASS=0
FAIL=0
SKIPPED=0
SCRATCH=$(mktemp -d /tmp/fanstore-shtest-XXXXXX)
FUSE_MOUNTS=()  # (fuse_data's, unmounted at exit)
trap 'for m in "${FUSE_MOUNTS[@]}"; do fusermount -u "$m" 2>/dev/null; done
      [ -n "${KEEP_SCRATCH:-}" ] || rm -rf "$SCRATCH"' EXIT
# Preloaded programs cache their libc patch plan: keep that inside the scratch directory.
export FANSTORE_CACHE_DIR=$SCRATCH/plan-cache
mkdir -p "$FANSTORE_CACHE_DIR" && chmod 700 "$FANSTORE_CACHE_DIR"

ok() { PASS=$((PASS + 1)); }
# (a failure whose cause is the scratch directory gone says so once: something outside the
# test removed it, and every check after fails for that reason alone)
SCRATCH_GONE_SAID=0
bad() {
  FAIL=$((FAIL + 1))
  if [ ! -d "$SCRATCH" ] && [ $SCRATCH_GONE_SAID = 0 ]; then
    SCRATCH_GONE_SAID=1
    echo "FAIL: this test's scratch directory $SCRATCH is gone: removed by another process" >&2
  fi
  echo "FAIL: $*" >&2
}
skip() { SKIPPED=$((SKIPPED + 1)); echo "SKIP: $*"; }  # a check not run, and why
# glibc's own shared objects, which any ELF file of ours may need (its companion libraries
# before 2.34, and the loader of either architecture).
GLIBC_SONAMES="libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1 ld-linux-x86-64.so.2 ld-linux-aarch64.so.1"
# needed_libs FILE: the sonames FILE's dynamic section lists as NEEDED (readelf), one a line.
needed_libs() { readelf -d --wide "$1" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
# is_glibc SONAME: whether it is one of GLIBC_SONAMES.
is_glibc() { [[ " $GLIBC_SONAMES " == *" $1 "* ]]; }
# tree_pids PID [SKIP]: PID's descendants, parents first, leaving out SKIP and its own.
tree_pids() {
  local p
  for p in $(pgrep -P "$1"); do
    [ "$p" != "${2:-}" ] || continue
    echo "$p"
    tree_pids "$p" "${2:-}"
  done
}
mkfifo "$SCRATCH/.watchdog"  # (never written: the watchdog's timed read on it just waits)
# watched CMD...: runs CMD as a plain command would run (in the foreground: its standard
# input, signals and process group are the test's). A watchdog beside it waits HANG_S
# seconds (default 500, under CTest's timeout of every test that calls it); if CMD is still
# running then, it is taken to hang: the command line and the stack of every thread of each
# process the test started (gdb, where installed) go to $SCRATCH/hang, those processes are
# killed, and the status is 124. A hang then fails the check that ran it and says where,
# where CTest's timeout would end the test with nothing but the time. (The watchdog waits
# in a builtin, so it leaves no process behind when it is stopped.)
watched() {
  local shell=$BASHPID rc=0 dog
  (
    trap 'exit 0' TERM
    read -r -t "${HANG_S:-500}" <>"$SCRATCH/.watchdog" && exit 0
    [ $? -gt 128 ] || exit 0  # (not the time running out: no verdict)
    me=$BASHPID
    pids=$(tree_pids "$shell" "$me")
    for p in $pids; do
      echo "== $p: $(tr '\0' ' ' </proc/$p/cmdline 2>/dev/null)"
      command -v gdb >/dev/null && timeout 60 gdb -batch -p "$p" -ex 'thread apply all bt' 2>&1 |
        grep -E '^(Thread|#)'
    done >"$SCRATCH/hang"
    kill -9 $pids 2>/dev/null
  ) </dev/null >/dev/null 2>&1 &
  dog=$!
  "$@" || rc=$?
  kill "$dog" 2>/dev/null || true
  wait "$dog" 2>/dev/null || true
  if [ -s "$SCRATCH/hang" ]; then
    echo "still running after ${HANG_S:-500} s, killed; the stacks of its processes:" >&2
    cat "$SCRATCH/hang" >&2
    rm -f "$SCRATCH/hang"
    return 124
  fi
  return $rc
}
# expect_rc RC DESCRIPTION -- CMD...
expect_rc() {
  local want=$1 what=$2; shift 3
  watched "$@" >"$SCRATCH/out" 2>"$SCRATCH/err"
  local got=$?
  if [ "$got" -eq 124 ] && grep -q '^still running after' "$SCRATCH/err"; then
    bad "$what: $(sed -n '/^still running after/,$p' "$SCRATCH/err")"
  elif [ "$got" -eq "$want" ]; then ok; else bad "$what: exit $got, expected $want; stderr: $(head -c 500 "$SCRATCH/err")"; fi
}
# expect_err_line SUBSTRING DESCRIPTION: the last command's stderr is one line containing it
expect_err_line() {
  local lines
  lines=$(wc -l <"$SCRATCH/err")
  if grep -qF -- "$1" "$SCRATCH/err" && [ "$lines" -eq 1 ]; then ok; else bad "$2: stderr was: $(cat "$SCRATCH/err")"; fi
}
expect_same() {  # expect_same FILE_A FILE_B DESCRIPTION
  if cmp -s "$1" "$2"; then ok; else bad "$3: $1 and $2 differ"; fi
}
# finish: the closing line, and the test's status: 1 if a check failed or none ran at all
# (a test that asserts nothing), 77 (CTest: skipped) if every check was skipped, else 0.
finish() {
  echo "$PASS passed, $FAIL failed$([ "$SKIPPED" -eq 0 ] || echo ", $SKIPPED skipped (above: why)")"
  [ "$FAIL" -eq 0 ] || return 1
  [ "$PASS" -gt 0 ] && return 0
  [ "$SKIPPED" -gt 0 ] && return 77
  echo "FAIL: no check ran" >&2
  return 1
}
# skip_without_torch: ends the test (77, CTest: skipped) with a SKIP line when Debian's
# python3-torch and python3-torchvision are not installed for /usr/bin/python3.
skip_without_torch() {
  if ! /usr/bin/python3 -c "import torch, torchvision" 2>/dev/null; then
    echo "SKIP: python3-torch / python3-torchvision not installed (ci/install-deps.sh installs them)"
    exit 77
  fi
}
# skip_without_fuse: ends the test (77) with a SKIP line where a packed dataset cannot be
# put on a FUSE file system (standing in for a shared one: MooseFS, JuiceFS, sshfs).
skip_without_fuse() {
  local tool
  for tool in mksquashfs squashfuse fusermount; do
    command -v $tool >/dev/null || { echo "SKIP: $tool not installed (ci/install-deps.sh installs it)"; exit 77; }
  done
  [ -e /dev/fuse ] || { echo "SKIP: no /dev/fuse"; exit 77; }
}
# fuse_data PACKED MNT: PACKED in a squashfs image, mounted at MNT with squashfuse (a FUSE
# file system; unmounted at exit). Non-zero when it cannot be made or mounted.
fuse_data() {
  mksquashfs "$1" "$1.sqfs" -quiet -no-progress >/dev/null && mkdir -p "$2" &&
    squashfuse "$1.sqfs" "$2" && FUSE_MOUNTS+=("$2")
}
# skip_without_mpi WHAT: where the build cannot run MPI ranks (FANSTORE_TEST_SKIP_MPI holds
# the reason), ends the test here with a SKIP line naming WHAT and the reason: with exit
# status 77, which CTest reports as skipped (SKIP_RETURN_CODE), when no check ran yet;
# else with the checks' verdict (the rest listed as skipped).
skip_without_mpi() {
  if [ -n "${FANSTORE_TEST_SKIP_MPI:-}" ]; then
    echo "SKIP: $1: $FANSTORE_TEST_SKIP_MPI"
    [ $((PASS + FAIL)) -gt 0 ] || exit 77
    SKIPPED=$((SKIPPED + 1))
    finish
    exit $?
  fi
}

# emulated: true under qemu-user (an aarch64 program on an x86-64 kernel, ci/arm64.sh),
# where vfork runs as fork, the application's io_uring and the top real-time signals are
# missing, and qemu's own threads share the process.
emulated() { [ "$(uname -m)" != x86_64 ] && grep -q '^vendor_id' /proc/cpuinfo 2>/dev/null; }
