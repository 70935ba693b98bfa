#!/usr/bin/env bash
# fanrun doctor as a user runs it on a new machine: the report and its JSON agree with the
# dataset and this libc, each problem is one line saying what to do, and the exit status
# says whether there was one.
# Usage: doctor_test.sh FANSTORE FANRUN SOURCE_DIR
FANSTORE=$1
FANRUN=$2
SRCDIR=$3
. "$SRCDIR/tests/bin/lib.sh"
S=$SCRATCH
PY=/usr/bin/python3
mkdir -p "$S/src/d"
for i in $(seq 1 30); do echo "file $i" >"$S/src/d/f$i"; done
"$FANSTORE" pack -q "$S/src" "$S/ds" || bad "pack"
unset SLURM_JOB_ID SLURM_STEP_ID PMI_RANK PMI_SIZE PMIX_RANK OMPI_COMM_WORLD_SIZE

# A healthy dataset: the JSON names this libc, the files, and the problems (an array).
"$FANRUN" doctor --data "$S/ds" --local-dir "$S/local/new" --json >"$S/out" 2>"$S/err"
rc=$?
$PY - "$S/out" "$rc" <<'PYEOF' && ok || bad "doctor --json: $(cat "$S/out" "$S/err")"
import json, sys
d = json.load(open(sys.argv[1]))
rc = int(sys.argv[2])
assert d["data"]["files"] == 30 and d["data"]["partitions"] >= 1, d["data"]
assert d["libc"]["sites"] > 100 and d["libc"]["refused"] == 0, d["libc"]
assert d["libc"]["patched"] + d["libc"]["uninteresting"] + d["libc"]["original_frame"] == d["libc"]["sites"]
assert d["local_dir"]["free_bytes"] > 0 and "to be made" in d["local_dir"]["path"], d["local_dir"]
assert d["mpi"]["library"], d["mpi"]
assert (rc == 0) == (d["problems"] == []), (rc, d["problems"])
PYEOF
[ ! -e "$S/local/new" ] && ok || bad "doctor made the --local-dir: it must change nothing"
# A missing top-level directory is looked at in / (its nearest existing ancestor).
"$FANRUN" doctor --local-dir /fanstore-doctor-missing-$$/x --json >"$S/out" 2>&1
$PY -c 'import json,sys; d=json.load(open(sys.argv[1]))["local_dir"]; assert d["path"].endswith("(to be made in /)") and d["free_bytes"] > 0, d' "$S/out" &&
  ok || bad "doctor --local-dir under a missing top directory: $(cat "$S/out")"

# The human report: one line per section, the verdict last.
"$FANRUN" doctor --data "$S/ds" >"$S/out" 2>&1
for k in "^libc " "^kernel " "^shm " "^MPI " "^dataset .*30 files" "^verdict: "; do
  grep -qE "$k" "$S/out" && ok || bad "doctor report lacks '$k': $(cat "$S/out")"
done
[ "$(tail -1 "$S/out" | cut -c1-8)" = "verdict:" ] && ok || bad "the verdict is not the last line"

# Problems: each one line with what to do; exit 1.
expect_rc 1 "doctor with a missing dataset" -- "$FANRUN" doctor --data "$S/nope"
grep -q "^problem: --data $S/nope: .*; " "$SCRATCH/out" && ok || bad "missing dataset problem line: $(cat "$SCRATCH/out")"
SLURM_JOB_ID=7 SLURM_STEP_ID=0 SLURM_NTASKS=2 "$FANRUN" doctor >"$S/out" 2>&1
[ $? = 1 ] && grep -q "^problem: srun started 2 tasks without a PMI.*--mpi=pmi2" "$S/out" && ok ||
  bad "srun without a PMI: $(cat "$S/out")"

# MPI is chosen when fanrun runs (bin/mpi_load.h): the report names the family and the
# library it would load; a FANSTORE_MPI no library answers is, under a launcher, a problem.
"$FANRUN" doctor >"$S/out" 2>&1
grep -qE "^MPI .*\((mpich|openmpi): /.*libmpi" "$S/out" && ok || bad "doctor names no MPI family and library: $(grep ^MPI "$S/out")"
PMI_RANK=0 PMI_SIZE=1 FANSTORE_MPI=/nonexistent/libmpi.so.12 "$FANRUN" doctor >"$S/out" 2>&1
[ $? = 1 ] && grep -q "^problem: FANSTORE_MPI=/nonexistent/libmpi.so.12: " "$S/out" && ok ||
  bad "a FANSTORE_MPI that does not load, under a launcher: $(cat "$S/out")"
FANSTORE_MPI=/nonexistent/libmpi.so.12 "$FANRUN" doctor >"$S/out" 2>&1
grep -q "^MPI .*none loadable: FANSTORE_MPI=/nonexistent/libmpi.so.12: " "$S/out" && grep -q "^verdict: " "$S/out" &&
  ! grep -q "^problem: FANSTORE_MPI" "$S/out" && ok ||
  bad "without a launcher, an MPI that does not load is reported, not a problem: $(cat "$S/out")"
# fanrun alone maps no MPI library and no plugin; one rank under mpiexec maps both.
maps_of_fanrun() { "$@" -- sh -c 'cat /proc/$PPID/maps' 2>&1; }
maps_of_fanrun "$FANRUN" --data "$S/ds" >"$S/maps"
grep -q "/fanrun$" "$S/maps" && ! grep -qE "libmpi|libfanstore_mpi" "$S/maps" && ok ||
  bad "fanrun alone: its maps name an MPI library (or are not fanrun's): $(grep -E 'libmpi|fanrun|rror' "$S/maps" | head -5)"
if [ -n "${FANSTORE_TEST_SKIP_MPI:-}" ]; then
  skip "fanrun under mpiexec maps the MPI: $FANSTORE_TEST_SKIP_MPI"
elif ! command -v mpiexec >/dev/null; then
  skip "fanrun under mpiexec maps the MPI: no mpiexec"
else
  maps_of_fanrun mpiexec -n 1 "$FANRUN" --data "$S/ds" >"$S/maps"
  grep -q "libmpi" "$S/maps" && grep -q "libfanstore_mpi_" "$S/maps" && ok ||
    bad "fanrun under mpiexec: no MPI library or plugin in its maps: $(grep -cE 'fanrun' "$S/maps") fanrun lines"
  # An MPI that cannot be chosen: exit 125 and one line saying why, not a crash.
  FANSTORE_MPI=bogus mpiexec -n 1 "$FANRUN" --data "$S/ds" -- true >"$S/out" 2>"$SCRATCH/err"
  rc=$?
  [ $rc = 125 ] && ok || bad "fanrun with FANSTORE_MPI=bogus under mpiexec: exit $rc"
  expect_err_line "fanrun: FANSTORE_MPI='bogus': expected mpich, openmpi or the path" "FANSTORE_MPI=bogus says why in one line"
fi

# --libc: another file planned; a file that is not one is a usage error, one line.
expect_rc 2 "doctor --libc of a text file" -- "$FANRUN" doctor --libc /etc/hostname
expect_err_line "doctor --libc /etc/hostname: not an" "doctor --libc of a text file says why"
finish
