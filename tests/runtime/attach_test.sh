#!/usr/bin/env bash
# Attach mode: `mpiexec -n 2 fanrun serve` stages and serves a dataset until stopped; an MPI
# application started by its own mpiexec through `fanrun attach` reads every file through
# the runtime (members of the other node via the agents) and compares the bytes with the
# native tree; `fanrun stop` ends the served job on every node and removes its files.
# Usage: attach_test.sh FANSTORE FANRUN MPI_READER SOURCE_DIR
FANSTORE=$1
FANRUN=$2
READER=$3
SRCDIR=$4
. "$SRCDIR/tests/bin/lib.sh"
skip_without_mpi "every check here runs MPI ranks"
S=$SCRATCH
JOB=attach-test-$$
JOBDIR=/dev/shm/fanstore-$(id -u)/job-$JOB
/usr/bin/python3 "$SRCDIR/bench/gen_dataset.py" imagenet "$S/src" --files 120 --classes 4 --mean-kb 8 >/dev/null
(cd "$S/src" && find . -type f | sed 's|^\./||' | sort) >"$S/list"
$FANSTORE pack -q "$S/src" "$S/packed" --partitions 4 || bad "pack"

expect_rc 125 "attach with no served job" -- "$FANRUN" attach --job "$JOB" -- true
expect_err_line "no such served job" "attach with no served job names the problem"

mpiexec -n 2 "$FANRUN" serve --data "$S/packed" --mount "$S/mnt" --local-dir "$S" --job "$JOB" \
  >"$S/serve.out" 2>"$S/serve.err" &
SERVE=$!
# Ready: both agents listen and rank 0 has printed how to attach (it does so once its
# start-up returns, a moment after the sockets appear).
for _ in $(seq 300); do
  [ "$(ls "$JOBDIR"/rank-*/agent.sock 2>/dev/null | wc -l)" -eq 2 ] &&
    grep -q "fanrun attach --job" "$S/serve.err" && break
  kill -0 $SERVE 2>/dev/null || break
  sleep 0.1
done
[ "$(ls "$JOBDIR"/rank-*/agent.sock 2>/dev/null | wc -l)" -eq 2 ] && ok || bad "serve did not become ready: $(cat "$S/serve.err")"
grep -q "fanrun attach --job $JOB" "$S/serve.err" && ok || bad "serve does not print how to attach"

timeout -k 10 300 mpiexec -n 2 "$FANRUN" attach --job "$JOB" -- "$READER" "$S/mnt" "$S/src" "$S/list" \
  >"$S/app.out" 2>"$S/app.err"
rc=$?
[ $rc -eq 0 ] && ok || bad "MPI application under attach: exit $rc: $(tail -5 "$S/app.err")"
grep -qx "files=$(($(wc -l <"$S/list") * 2)) mismatches=0" "$S/app.out" && ok || bad "MPI application read: $(cat "$S/app.out")"

expect_rc 0 "fanrun stop" -- "$FANRUN" stop --job "$JOB"
timeout 60 tail --pid=$SERVE -f /dev/null
wait $SERVE
rc=$?
[ $rc -eq 0 ] && ok || bad "served job exit $rc after stop: $(tail -3 "$S/serve.err")"
[ ! -e "$JOBDIR" ] && ok || bad "job directory left behind: $JOBDIR"
[ -z "$(ls -d "$S"/fanstore-* 2>/dev/null)" ] && ok || bad "local directories left behind"
finish
