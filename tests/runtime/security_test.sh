#!/usr/bin/env bash
# FanStore on a shared node: two unprivileged users, made here and removed at the end, a
# victim and an attacker. Every attack is tried as the attacker would, and must fail:
#  - squatting the victim's job directory under /dev/shm (planted rank files, a plain file,
#    a fake served job): the victim's files survive, its job reads the right bytes;
#  - a dataset that chooses a system mount point (Python's dist-packages, /etc): refused,
#    no code of it runs;
#  - members the kernel would refuse (0600, 0700 directories, groups): the same answers
#    through fanrun as natively, and from `fanstore cat`; pack's output modes;
#  - mutations that would reach fanrun's skeleton directories (fchmodat2, /proc/self/cwd,
#    a link to the mount point made after the start).
# Exits 77 (CTest: skipped) when not run as root, which is needed to make the users.
# Usage: security_test.sh FANSTORE FANRUN SOURCE_DIR
FANSTORE=$1
FANRUN=$2
SRCDIR=$3
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: making the test users needs root"
  exit 77
fi
. "$SRCDIR/tests/bin/lib.sh"
# (outputs are compared with native ones: no start-up lines; DATA is local, so fanrun
# copies it to /dev/shm while the programs run where the node makes huge pages)
export FANSTORE_QUIET=1
S=$SCRATCH
chmod 755 "$S"
PY=/usr/bin/python3
V=fsv$$
A=fsa$$
G=fsg$$
groupadd "$G" && useradd -M -N -d /nonexistent -s /bin/sh "$V" &&
  useradd -M -N -d /nonexistent -s /bin/sh -G "$G" "$A" || { echo "cannot make test users"; exit 1; }
VU=$(id -u "$V")
AU=$(id -u "$A")
cleanup() {
  rm -rf "/dev/shm/fanstore-$VU" "/dev/shm/fanstore-$AU" /dev/shm/fanstore-"$VU"-* /dev/shm/fanstore-"$AU"-*
  userdel "$V" 2>/dev/null
  userdel "$A" 2>/dev/null
  groupdel "$G" 2>/dev/null
  [ -n "${KEEP_SCRATCH:-}" ] || rm -rf "$SCRATCH"
}
trap cleanup EXIT
mkdir -p "$S/home-v" "$S/home-a" "$S/cache-v" "$S/cache-a"
chown "$V" "$S/home-v" "$S/cache-v"
chown "$A" "$S/home-a" "$S/cache-a"
chmod 700 "$S/home-v" "$S/home-a" "$S/cache-v" "$S/cache-a"
as() {  # as USER CMD...: runs CMD as USER (its supplementary groups too), from $S
  local u=$1 h
  shift
  h=$S/home-v
  [ "$u" = "$A" ] && h=$S/home-a
  (cd "$S" && setpriv --reuid="$u" --regid="$(id -g "$u")" --init-groups \
    env -u FANSTORE_CACHE_DIR HOME="$h" FANSTORE_CACHE_DIR="${h/home/cache}" "$@")
}

# The victim's tree: public, private (0600), group-readable (0640, the attacker's group as a
# supplementary one), a closed directory (0700), a search-only one (0711), a private program.
T=$S/tree
mkdir -p "$T/pub" "$T/closed" "$T/searchonly"
echo public >"$T/pub/a.txt"
echo secret >"$T/secret.txt"
echo group >"$T/grp.txt"
echo inside >"$T/closed/x.txt"
echo reachable >"$T/searchonly/f"
printf '#!/bin/sh\necho ran\n' >"$T/prog.sh"
chown -R "$V:$(id -g "$V")" "$T"
chgrp "$G" "$T/grp.txt"
chmod 600 "$T/secret.txt"
chmod 640 "$T/grp.txt"
chmod 700 "$T/closed" "$T/prog.sh"
chmod 711 "$T/searchonly"
chmod 755 "$T" "$T/pub"

# --- pack: the output is as closed as its members need ---------------------------------
mkdir -m 1777 "$S/d"  # where datasets are packed: a shared directory
as "$V" "$FANSTORE" pack -q "$T" "$S/d/ds" 2>"$S/err"
[ "$(stat -c %a "$S/d/ds")" = 700 ] && [ "$(stat -c %a "$S/d/ds/manifest")" = 600 ] &&
  [ "$(stat -c %a "$S/d/ds/part-00000.fsb")" = 600 ] && ok ||
  bad "pack of a tree with a 0600 member: $(stat -c '%a %n' "$S/d/ds" "$S/d/ds"/*)"
grep -q "readable by you only" "$S/err" && [ "$(wc -l <"$S/err")" -eq 1 ] && ok ||
  bad "pack says once why the output is private: $(cat "$S/err")"
as "$V" "$FANSTORE" pack -q --public "$T" "$S/d/pubds" 2>"$S/err"
[ "$(stat -c %a "$S/d/pubds")" = 755 ] && [ "$(stat -c %a "$S/d/pubds/part-00000.fsb")" = 644 ] && ok ||
  bad "pack --public: $(stat -c '%a %n' "$S/d/pubds" "$S/d/pubds"/*)"
grep -q "is readable by all" "$S/err" && ok || bad "pack --public says what it exposes: $(cat "$S/err")"

# --- fanstore cat/ls: the members' modes decide, as the kernel would ----------------------
as "$A" "$FANSTORE" cat "$S/d/ds" pub/a.txt >"$S/out" 2>"$S/err"
[ $? -ne 0 ] && [ ! -s "$S/out" ] && ok || bad "the attacker read a private dataset"
as "$A" "$FANSTORE" cat "$S/d/pubds" secret.txt >"$S/out" 2>"$S/err"
rc=$?
[ $rc -eq 1 ] && [ ! -s "$S/out" ] && [ "$(cat "$S/err")" = "fanstore: cat: secret.txt: Permission denied" ] && ok ||
  bad "fanstore cat of a 0600 member by another user: exit $rc, out '$(cat "$S/out")', err '$(cat "$S/err")'"
as "$A" "$FANSTORE" cat "$S/d/pubds" closed/x.txt >"$S/out" 2>&1 && bad "cat below a 0700 directory" || ok
[ "$(as "$A" "$FANSTORE" cat "$S/d/pubds" grp.txt)" = group ] && ok || bad "cat through a supplementary group"
[ "$(as "$A" "$FANSTORE" cat "$S/d/pubds" searchonly/f)" = reachable ] && ok || bad "cat below a 0711 directory"
as "$A" "$FANSTORE" ls "$S/d/pubds" searchonly >/dev/null 2>&1 && bad "ls of a 0711 directory" || ok
[ "$(as "$V" "$FANSTORE" cat "$S/d/pubds" secret.txt)" = secret ] && ok || bad "the owner's cat of its 0600 member"

# --- fanrun: the same answers as the kernel's on the native tree --------------------------
# probe.py prints, for each path, what stat, open+read, listdir, access(R/X) and chdir say.
cat >"$S/probe.py" <<'EOF'
import os, sys
def try_(f):
    try:
        r = f()
        return "ok" if r is None else repr(r)
    except OSError as e:
        return "errno %d" % e.errno
for p in sys.argv[1:]:
    print(p,
          try_(lambda: os.stat(p).st_mode),
          try_(lambda: open(p, "rb").read()),
          try_(lambda: sorted(os.listdir(p))),
          os.access(p, os.R_OK), os.access(p, os.X_OK),
          try_(lambda: os.chdir(p)),
          try_(lambda: os.open(p, os.O_PATH) and None))
    os.chdir(os.environ["ROOT"])
EOF
chmod 644 "$S/probe.py"
paths="pub/a.txt secret.txt grp.txt closed closed/x.txt closed/none searchonly searchonly/f prog.sh ."
mkdir -m 1777 "$S/m"  # mount points: where both users may make fanrun's directories
MNT=$S/m/mnt
for who in "$A" "$V"; do
  (as "$who" env ROOT="$T" sh -c "cd '$T' && $PY '$S/probe.py' $paths") >"$S/native.$who" 2>&1
  (as "$who" "$FANRUN" --data "$S/d/pubds" --mount "$MNT" -- sh -c "cd '$MNT' && ROOT='$MNT' $PY '$S/probe.py' $paths") \
    >"$S/fanrun.$who" 2>&1
  expect_same "$S/native.$who" "$S/fanrun.$who" "permissions through fanrun as $([ "$who" = "$A" ] && echo the other user || echo the owner)"
  # coreutils and the shell: their messages name the same errors
  cmd="cat secret.txt; cat closed/x.txt; ls closed; ls searchonly; cat searchonly/f; ./prog.sh; cd closed; test -r grp.txt && echo grp-readable"
  # (bash: dash execs from a vfork child, where the runtime finds no program in the dataset)
  (as "$who" bash -c "cd '$T' && { $cmd; } 2>&1; echo rc=\$?") >"$S/native.sh.$who"
  (as "$who" "$FANRUN" --data "$S/d/pubds" --mount "$MNT" -- bash -c "cd '$MNT' && { $cmd; } 2>&1; echo rc=\$?") >"$S/fanrun.sh.$who" 2>&1
  expect_same "$S/native.sh.$who" "$S/fanrun.sh.$who" "coreutils' answers through fanrun for uid $(id -u "$who")"
done
grep -q "Permission denied" "$S/fanrun.sh.$A" && ok || bad "no EACCES seen by the other user (test setup)"

# --- squatting the victim's job directory -------------------------------------------------
echo precious >"$S/home-v/precious"
chown "$V" "$S/home-v/precious"
B=/dev/shm/fanstore-$VU
rm -rf "$B"  # (made by the runs above: the attacker comes before the victim's first job)
run_victim() {  # the victim's job: one file read through fanrun
  as "$V" "$FANRUN" --data "$S/d/pubds" --mount "$MNT" -- cat "$MNT/pub/a.txt" >"$S/out" 2>"$S/err"
}
# planted rank files that name the victim's file as a stale local directory
as "$A" sh -c "mkdir -p '$B/job-evil/rank-0' && chmod -R 777 '$B' &&
  echo 999999999 >'$B/job-evil/rank-0/pid' &&
  echo '$B/../../..$S/home-v/precious' >'$B/job-evil/rank-0/local' &&
  mkdir -p '$B/job-fake/rank-0' && echo serve >'$B/job-fake/serve' && touch '$B/job-fake/rank-0/agent.sock'"
run_victim
rc=$?
[ $rc -eq 0 ] && [ "$(cat "$S/out")" = public ] && ok || bad "the victim's job under a squatted /dev/shm: exit $rc: $(cat "$S/err")"
[ -e "$S/home-v/precious" ] && ok || bad "the victim's file was removed through planted rank files"
grep -q "warning: $B: owned by uid $AU" "$S/err" && [ "$(wc -l <"$S/err")" -eq 1 ] && ok ||
  bad "one warning line names the foreign directory: $(cat "$S/err")"
as "$V" "$FANRUN" attach -- true >"$S/out" 2>"$S/err"
[ $? -eq 125 ] && grep -q "no served job" "$S/err" && ok || bad "attach took a job another user planted: $(cat "$S/err")"
ls -d "$B"-?????? >/dev/null 2>&1 && bad "the victim's fresh directory was left behind: $(ls -d "$B"-*)" || ok
rm -rf "$B"
# a plain file of that name (the victim cannot remove it: /dev/shm is sticky)
as "$A" sh -c "echo x >'$B'"
run_victim
[ $? -eq 0 ] && [ "$(cat "$S/out")" = public ] && ok || bad "the victim's job with a file squatting its directory: $(cat "$S/err")"
rm -f "$B"
# the attacker cannot write into the victim's own directory once it exists
run_victim
as "$A" sh -c "touch '$B/x'" 2>/dev/null && bad "the attacker wrote into the victim's job directory" || ok
# --local-dir: a directory others may write to must be sticky; fanrun's names inside are fresh
mkdir -m 777 "$S/open" && mkdir -m 1777 "$S/sticky"
as "$V" "$FANRUN" --data "$S/d/pubds" --mount "$MNT" --local-dir "$S/open" -- true 2>"$S/err"
[ $? -eq 125 ] && grep -q -- "--local-dir $S/open: others can write to it and it is not sticky" "$S/err" && ok ||
  bad "--local-dir in a non-sticky shared directory: $(cat "$S/err")"
as "$V" "$FANRUN" --data "$S/d/pubds" --mount "$MNT" --local-dir "$S/sticky/new/deeper" -- cat "$MNT/pub/a.txt" >"$S/out" 2>"$S/err"
[ $? -eq 0 ] && [ "$(cat "$S/out")" = public ] && [ -z "$(ls -A "$S/sticky/new/deeper")" ] && ok ||
  bad "--local-dir made and cleaned: $(cat "$S/err"); left: $(ls -A "$S/sticky/new/deeper" 2>&1)"
[ "$(stat -c %a "$S/sticky/new")" = 700 ] && ok || bad "--local-dir's new directories are the user's only"

# --- a dataset that chooses a system mount point ------------------------------------------
# Made as its author would on a machine of theirs: a tree packed from where Python loads
# code (a private mount namespace puts it there).
mkdir -p "$S/evil"
echo "import os; open('$S/evil-ran', 'w').write('ran')" >"$S/evil/zz-evil.pth"
unshare -m sh -c "mount --bind '$S/evil' /usr/lib/python3/dist-packages &&
  '$FANSTORE' pack -q --public /usr/lib/python3/dist-packages '$S/evilds'" || bad "packing the hostile dataset (setup)"
grep -q "^source /usr/lib/python3/dist-packages" "$S/evilds/manifest" || bad "the hostile dataset's source (setup)"
as "$V" "$FANRUN" --data "$S/evilds" -- "$PY" -c 'print(42)' >"$S/out" 2>"$S/err"
rc=$?
[ $rc -eq 125 ] && [ ! -s "$S/out" ] && [ ! -e "$S/evil-ran" ] && ok || bad "a dataset mounted itself over dist-packages: exit $rc"
[ "$(cat "$S/err")" = "fanrun: the dataset was packed from /usr/lib/python3/dist-packages, a Python package directory: it is not mounted there by default; choose where with --mount DIR" ] &&
  ok || bad "the refusal is one line that asks for --mount: $(cat "$S/err")"
"$FANRUN" --data "$S/evilds" -- "$PY" -c 'print(42)' >/dev/null 2>&1
[ ! -e "$S/evil-ran" ] && ok || bad "root's python ran the dataset's .pth"
unshare -m sh -c "mount --bind '$S/evil' /etc && '$FANSTORE' pack -q --public /etc '$S/etcds'" || bad "packing /etc (setup)"
"$FANRUN" --data "$S/etcds" -- cat /etc/hostname >/dev/null 2>"$S/err"
[ $? -eq 125 ] && grep -q "packed from /etc, a system directory" "$S/err" && ok || bad "a dataset from /etc: $(cat "$S/err")"
as "$V" "$FANRUN" --data "$S/evilds" --mount "$S/m/evil" -- sh -c "ls '$S/m/evil'" >"$S/out" 2>&1
[ "$(cat "$S/out")" = zz-evil.pth ] && ok || bad "the same dataset where the user says: $(cat "$S/out")"

# --- mutations that would reach the skeleton ----------------------------------------------
cat >"$S/mutate.py" <<'EOF'
import ctypes, os, sys
mnt = sys.argv[1]
libc = ctypes.CDLL(None, use_errno=True)
def errno_of(f):
    try:
        f()
        return 0
    except OSError as e:
        return e.errno
AT_FDCWD = -100
r = libc.syscall(452, AT_FDCWD, (mnt + "/pub").encode(), 0o777, 0)  # fchmodat2
print("fchmodat2", r, ctypes.get_errno())
os.chdir(mnt + "/pub")
print("proc-cwd-create", errno_of(lambda: os.close(os.open("/proc/self/cwd/new", os.O_CREAT | os.O_WRONLY, 0o644))))
print("proc-cwd-read", open("/proc/self/cwd/a.txt").read().strip())
os.chdir("/")
link = sys.argv[2]
os.symlink(mnt, link)
print("link-create", errno_of(lambda: os.close(os.open(link + "/pub/new", os.O_CREAT | os.O_WRONLY, 0o644))))
print("link-mkdir", errno_of(lambda: os.mkdir(link + "/pub/d")))
print("link-read", open(link + "/pub/a.txt").read().strip())
print("link-list", sorted(os.listdir(link + "/pub")), sorted(os.listdir(link)))
EOF
chmod 644 "$S/mutate.py"
mkdir -m 777 "$S/links"
as "$V" "$FANRUN" --data "$S/d/pubds" --mount "$S/m/mnt2/data" -- "$PY" "$S/mutate.py" "$S/m/mnt2/data" "$S/links/l" >"$S/out" 2>&1
cat >"$S/want" <<EOF
fchmodat2 -1 30
proc-cwd-create 30
proc-cwd-read public
link-create 30
link-mkdir 13
link-read public
link-list ['a.txt'] ['closed', 'grp.txt', 'prog.sh', 'pub', 'searchonly', 'secret.txt']
EOF
expect_same "$S/want" "$S/out" "mutations through fchmodat2, /proc/self/cwd and a late link (EROFS 30, EACCES 13), and listings through that link"
[ ! -e "$S/m/mnt2" ] && ok || bad "the skeleton was left behind (something was created in it): $(find "$S/m/mnt2")"

finish
