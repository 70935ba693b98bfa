#!/usr/bin/env bash
# fanrun with Apptainer as CMD (the container command unchanged), Apptainer being Debian
# unstable's, in a root of its own entered with bubblewrap (Apptainer refuses a chroot):
# an image made from a Debian 11 root reads every file byte-exact at a mount path the
# image does not have, with `--userns` alone, with `--cleanenv --containall
# --writable-tmpfs` (no host variable, /tmp or /dev/shm inside), as `singularity exec`, and
# with two ranks under mpiexec; a write is EROFS; a static program, which cannot load the
# runtime, is named in one line after it ran.
# Usage: apptainer_test.sh SOURCE_DIR   (as root; the bundle, the Debian 11 root and the
#        unstable root with apptainer and mpich that ci/test.sh makes)
SRCDIR=$1
. "$SRCDIR/tests/bin/lib.sh"
R=${FANSTORE_ROOTS:-/var/cache/fanstore-roots}/sid-apptainer
command -v bwrap >/dev/null || { echo "SKIP: no bwrap (apt-get install bubblewrap)"; exit 77; }
[ -x "$R/usr/bin/apptainer" ] || {
  echo "SKIP: no Apptainer root at $R (ci/test.sh makes it: ci/debian-root.sh sid:apptainer, apptainer and mpich installed)"
  exit 77
}
. "$SRCDIR/tests/containers/lib.sh"
[ -x "$ROOTS/bullseye/usr/bin/python3" ] || { echo "SKIP: no Debian 11 root with python3 at $ROOTS/bullseye"; exit 77; }
IMG=$S/img
mkdir -p "$IMG" "$S/local"
# The unstable root as /, this machine's /dev, /proc and /sys, a /tmp of its own holding
# the scratch directory (bundle, dataset, image, outputs).
inroot() {
  timeout 300 bwrap --bind "$R" / --dev-bind /dev /dev --bind /proc /proc --bind /sys /sys \
    --tmpfs /tmp --bind "$S" "$S" --ro-bind "$ROOTS/bullseye" "$IMG" \
    --setenv HOME /root --setenv USER "$USER" --setenv PATH /usr/sbin:/usr/bin:/sbin:/bin -- "$@"
}
FANRUN=$B/bin/fanrun
[ ! -e "$ROOTS/bullseye$MNT" ] && ok || bad "the image has $MNT"

inroot "$FANRUN" --data "$DS" --mount "$MNT" -- \
  apptainer exec --userns "$IMG" python3 "$S/reader.py" "$MNT" "$S/plain.sum" 2>"$S/plain.err"
same_as_native "$S/plain.sum" "apptainer exec --userns ($(grep -v WARNING "$S/plain.err" | head -c 300))"

inroot "$FANRUN" --data "$DS" --mount "$MNT" -- \
  apptainer exec --userns --cleanenv --containall --writable-tmpfs --bind "$S" "$IMG" \
  sh -c "env | grep -c '^FANSTORE_' >'$S/contained.vars'; ls /dev/shm | wc -l >'$S/contained.shm'
         python3 '$S/reader.py' '$MNT' '$S/contained.sum'; python3 '$S/writer.py' '$MNT/new'" \
  >"$S/contained.out" 2>"$S/contained.err"
same_as_native "$S/contained.sum" "apptainer exec --cleanenv --containall ($(grep -v WARNING "$S/contained.err" | head -c 300))"
[ "$(cat "$S/contained.out")" = EROFS ] && ok || bad "a write into the mount: $(cat "$S/contained.out")"
[ "$(cat "$S/contained.shm" 2>/dev/null)" = 0 ] && ok || bad "--containall's /dev/shm is its own: $(cat "$S/contained.shm" 2>&1)"

inroot "$FANRUN" --data "$DS" --mount "$MNT" -- \
  singularity exec --userns "$IMG" python3 "$S/reader.py" "$MNT" "$S/singularity.sum" 2>"$S/singularity.err"
same_as_native "$S/singularity.sum" "singularity exec ($(grep -v WARNING "$S/singularity.err" | head -c 300))"

if [ -x "$R/usr/bin/mpiexec" ]; then
  inroot mpiexec -n 2 "$FANRUN" --local-dir "$S/local" --data "$DS" --mount "$MNT" -- \
    apptainer exec --userns "$IMG" sh -c "python3 '$S/reader.py' '$MNT' '$S/rank'\$FANSTORE_RANK.sum" 2>"$S/ranks.err"
  for r in 0 1; do same_as_native "$S/rank$r.sum" "apptainer under mpiexec, rank $r ($(grep -v WARNING "$S/ranks.err" | head -c 300))"; done
else
  skip "no mpiexec in $R: two ranks not run"
fi

# A static program cannot load the runtime: said in one line once it has run.
inroot "$FANRUN" --data "$DS" --mount "$MNT" -- apptainer exec --userns "$IMG" /sbin/ldconfig -p >/dev/null 2>"$S/static.err"
grep -v WARNING "$S/static.err" >"$SCRATCH/err"
expect_err_line "fanrun: no process in the apptainer container loaded the runtime ($B/lib/libfanstore.so)" "a static program in the container"
finish
