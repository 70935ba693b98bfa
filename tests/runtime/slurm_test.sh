#!/usr/bin/env bash
# FanStore started by Slurm, on a one-host Slurm this test starts for itself: a private
# munged, slurmctld and slurmd (Debian's slurm-wlm: proctrack/linuxproc, task/none, no
# cgroups, MpiDefault=none as a site would have it, ports and state in a scratch dir).
#  - srun --mpi=pmi2 -n 2 fanrun: two ranks form one job (nodes=2) and every file read
#    under it is byte-identical to the source;
#  - srun -n 2 fanrun without a PMI: each task stops with one line naming --mpi=pmi2,
#    never two separate one-node jobs;
#  - an sbatch job in wrap mode, and one serving with fanrun serve while fanrun attach
#    runs in a second step (--overlap), as docs/launchers.md shows them; the variables
#    FANSTORE_RANK, FANSTORE_NODES, FANSTORE_LOCAL_RANK reach the command in each.
# Skipped (77) when not root or Slurm is not installed (ci/install-deps.sh installs it).
# Usage: slurm_test.sh FANSTORE FANRUN SOURCE_DIR
FANSTORE=$1
FANRUN=$2
SRCDIR=$3
. "$SRCDIR/tests/bin/lib.sh"
skip_without_mpi "Slurm starts MPI ranks"
for t in slurmctld slurmd munged srun sbatch scontrol; do
  command -v $t >/dev/null || { echo "SKIP: Slurm is not installed ($t missing; apt-get install slurm-wlm munge)"; exit 77; }
done
[ "$(id -u)" = 0 ] || { echo "SKIP: slurmd must run as root to start jobs"; exit 77; }
S=$SCRATCH
chmod 755 "$S"
D=$S/slurm
mkdir -p "$D"/{state,spool,log,run}
export FANSTORE_QUIET=1

# A private munged with its own key.
dd if=/dev/urandom of="$D/munge.key" bs=1024 count=1 status=none
chmod 400 "$D/munge.key"
munged --force --socket="$D/munge.sock" --key-file="$D/munge.key" --pid-file="$D/run/munged.pid" \
  --log-file="$D/log/munged.log" --seed-file="$D/munged.seed" || { echo "FAIL: munged did not start"; exit 1; }

port=$((20000 + RANDOM % 20000))
cat >"$D/slurm.conf" <<CONF
ClusterName=fanstoretest
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
AuthInfo=socket=$D/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/run/slurmctld.pid
SlurmdPidFile=$D/run/slurmd.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
InactiveLimit=0
KillWait=5
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
export SLURM_CONF=$D/slurm.conf
stop_slurm() {
  scancel --quiet -u root 2>/dev/null
  for p in slurmd slurmctld munged; do
    [ -f "$D/run/$p.pid" ] && kill "$(cat "$D/run/$p.pid")" 2>/dev/null
  done
  sleep 1
  [ -n "${KEEP_SCRATCH:-}" ] || rm -rf "$SCRATCH"
}
trap stop_slurm EXIT
slurmctld -f "$D/slurm.conf" || { echo "FAIL: slurmctld did not start: $(tail -3 "$D/log/slurmctld.log")"; exit 1; }
slurmd -f "$D/slurm.conf" -N localhost || { echo "FAIL: slurmd did not start: $(tail -3 "$D/log/slurmd.log")"; exit 1; }
for i in $(seq 1 60); do
  sinfo -h -o %T 2>/dev/null | grep -qE '^idle' && break
  sleep 0.5
done
if ! sinfo -h -o %T 2>/dev/null | grep -qE '^idle'; then
  echo "SKIP: the one-host Slurm did not come up: $(sinfo 2>&1 | tail -1); $(tail -2 "$D/log/slurmd.log")"
  exit 77
fi

# A tree, packed, and its checksums.
mkdir -p "$S/src/a/b"
seq 1 40000 >"$S/src/a/n.txt"
head -c 500000 /dev/urandom >"$S/src/a/b/r.bin"
for i in $(seq 1 120); do echo "file $i" >"$S/src/a/f$i"; done
"$FANSTORE" pack -q --partitions 2 "$S/src" "$S/ds" || { echo "FAIL: pack"; exit 1; }
(cd "$S/src" && find . -type f | sort | xargs sha256sum) >"$S/native.sum"
chmod -R a+rX "$S"
READ="cd $S/mnt && find . -type f | sort | xargs sha256sum"
ENVLINE='echo "rank=$FANSTORE_RANK nodes=$FANSTORE_NODES local=${FANSTORE_LOCAL_RANK-unset}"'

# 1. srun --mpi=pmi2: one job of two ranks, each reading every file.
srun --mpi=pmi2 -n 2 -o "$S/pmi2.%t.out" -e "$S/pmi2.%t.err" \
  "$FANRUN" --data "$S/ds" --mount "$S/mnt" --local-dir "$S/local" -- sh -c "$ENVLINE >&2; $READ"
rc=$?
[ $rc = 0 ] && ok || bad "srun --mpi=pmi2 -n 2 fanrun: exit $rc; $(cat "$S"/pmi2.*.err | head -5)"
for t in 0 1; do
  expect_same "$S/native.sum" "$S/pmi2.$t.out" "srun --mpi=pmi2 task $t: every file byte-identical"
done
grep -q "rank=0 nodes=2 local=0" "$S/pmi2.0.err" && grep -q "rank=1 nodes=2 local=1" "$S/pmi2.1.err" && ok ||
  bad "srun --mpi=pmi2: the command's variables: $(cat "$S"/pmi2.*.err | grep rank=)"

# 2. srun without a PMI: one line per task naming the fix, exit 125, no command run.
srun -n 2 -o "$S/nopmi.%t.out" -e "$S/nopmi.%t.err" \
  "$FANRUN" --data "$S/ds" --mount "$S/mnt" -- sh -c "echo ran"
rc=$?
[ $rc = 125 ] && ok || bad "srun -n 2 fanrun without a PMI: exit $rc, expected 125 (the tasks' own)"
for t in 0 1; do
  if [ "$(wc -l <"$S/nopmi.$t.err")" = 1 ] && grep -q -- "--mpi=pmi2" "$S/nopmi.$t.err" && ! grep -q ran "$S/nopmi.$t.out"; then
    ok
  else
    bad "srun without a PMI, task $t: stderr '$(cat "$S/nopmi.$t.err")', stdout '$(cat "$S/nopmi.$t.out")'"
  fi
done

# wait_job ID: until it has left the queue (at most 3 minutes).
wait_job() {
  for i in $(seq 1 360); do
    squeue -h -j "$1" 2>/dev/null | grep -q . || return 0
    sleep 0.5
  done
  scancel "$1"
  return 1
}

# 3. sbatch, wrap mode.
cat >"$S/wrap.sbatch" <<JOB
#!/bin/bash
#SBATCH --ntasks=2
#SBATCH --output=$S/wrap.out
srun --mpi=pmi2 -o $S/wrap.%t.sum "$FANRUN" --data "$S/ds" --mount "$S/mnt" -- sh -c '$READ'
echo "job exit \$?"
JOB
job=$(sbatch --parsable "$S/wrap.sbatch") && wait_job "$job" && ok || bad "sbatch wrap job did not finish"
grep -q "job exit 0" "$S/wrap.out" && ok || bad "sbatch wrap job: $(cat "$S/wrap.out")"
for t in 0 1; do expect_same "$S/native.sum" "$S/wrap.$t.sum" "sbatch wrap task $t: byte-identical"; done

# 4. sbatch, serve + attach: the server in one step, the application in another (--overlap).
cat >"$S/attach.sbatch" <<JOB
#!/bin/bash
#SBATCH --ntasks=2
#SBATCH --output=$S/attach.out
srun --mpi=pmi2 --overlap "$FANRUN" serve --data "$S/ds" --mount "$S/mnt" --job sb\$SLURM_JOB_ID &
for i in \$(seq 1 100); do "$FANRUN" attach --job sb\$SLURM_JOB_ID -- true 2>/dev/null && break; sleep 0.2; done
srun --overlap -n 2 -o $S/attach.%t.sum -e $S/attach.%t.env "$FANRUN" attach --job sb\$SLURM_JOB_ID -- sh -c '$ENVLINE >&2; $READ'
echo "attach exit \$?"
"$FANRUN" stop --job sb\$SLURM_JOB_ID
wait
echo "serve exit \$?"
JOB
job=$(sbatch --parsable "$S/attach.sbatch") && wait_job "$job" && ok || bad "sbatch serve+attach job did not finish"
grep -q "attach exit 0" "$S/attach.out" && grep -q "serve exit 0" "$S/attach.out" && ok ||
  bad "sbatch serve+attach: $(cat "$S/attach.out")"
for t in 0 1; do expect_same "$S/native.sum" "$S/attach.$t.sum" "sbatch attach task $t: byte-identical"; done
grep -q "nodes=2 local=0" "$S/attach.0.env" && grep -q "nodes=2 local=1" "$S/attach.1.env" && ok ||
  bad "attach: the command's variables: $(cat "$S"/attach.*.env)"
finish
