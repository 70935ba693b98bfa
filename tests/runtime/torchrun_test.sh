#!/usr/bin/env bash
# torchrun on FanStore, two simulated nodes of two processes each (--nnodes 2
# --nproc_per_node 2, gloo on CPU, a DistributedSampler, DataLoader workers), the way
# docs/launchers.md shows it:
#  - native: two torchrun agents (node ranks 0 and 1) reading the source tree;
#  - wrap mode: mpiexec -n 2 fanrun ... -- torchrun --node_rank $FANSTORE_RANK ...;
#  - attach mode: mpiexec -n 2 fanrun serve, then mpiexec -n 2 fanrun attach -- torchrun ...
# Every process's samples (in order), the bytes it read and the final parameters must be
# identical to the native run's, and torchrun's variables (WORLD_SIZE, RANK, LOCAL_RANK)
# must be torchrun's, not fanrun's. Debian's torch 1.13 on Python 3.11 needs
# --redirects 1 --tee 2 --log_dir DIR.
# Usage: torchrun_test.sh FANSTORE FANRUN SOURCE_DIR
FANSTORE=$1
FANRUN=$2
SRCDIR=$3
. "$SRCDIR/tests/bin/lib.sh"
S=$SCRATCH
PY=/usr/bin/python3
if ! $PY -c "import torch" 2>/dev/null || ! command -v torchrun >/dev/null; then
  echo "SKIP: python3-torch (torchrun) not installed (ci/install-deps.sh installs it)"
  exit 77
fi
skip_without_mpi "torchrun under mpiexec fanrun"
export FANSTORE_QUIET=1
TRAIN=$SRCDIR/tests/runtime/ddp_train.py
# Four classes of files of varied sizes.
$PY - "$S/src" <<'PYEOF'
import os, random, sys
rnd = random.Random(3)
for c in range(4):
    d = os.path.join(sys.argv[1], "c%d" % c)
    os.makedirs(d)
    for i in range(40):
        with open(os.path.join(d, "s%03d.bin" % i), "wb") as f:
            f.write(bytes([c * 40 + (i % 7)]) * 16 + rnd.randbytes(rnd.choice([100, 3000, 20000])))
PYEOF
"$FANSTORE" pack -q --partitions 2 "$S/src" "$S/ds" || { bad "pack"; finish; exit 1; }
MNT=$S/mnt
# A port nothing listens on now (the kernel's choice; a fixed range met other tests' ports
# under ctest -j, and the agent left alone then waits for its peer for ever).
port() { $PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# torchrun_node NODE_RANK PORT DATA OUT: one node's agent with two processes.
TR="torchrun --nnodes 2 --nproc_per_node 2 --master_addr 127.0.0.1 --redirects 1 --tee 2"

# Native.
p=$(port)
mkdir -p "$S/native" "$S/logs"
for n in 0 1; do
  $TR --node_rank $n --master_port $p --log_dir "$S/logs/native$n" "$TRAIN" "$S/src" "$S/native" \
    >"$S/native.$n.log" 2>&1 &
done
wait
[ "$(ls "$S/native" | wc -l)" = 4 ] && ok || bad "native torchrun: $(tail -5 "$S/native.0.log")"

compare() {  # compare DIR WHAT
  local r
  for r in 0 1 2 3; do
    if $PY - "$S/native/rank$r.json" "$1/rank$r.json" <<'PYEOF'; then ok; else bad "$2: rank $r differs from native"; fi
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
keys = ["samples", "bytes", "params", "env", "files"]
bad = [k for k in keys if a.get(k) != b.get(k)]
if bad:
    print("differ in", bad, {k: (str(a.get(k))[:200], str(b.get(k))[:200]) for k in bad}, file=sys.stderr)
sys.exit(1 if bad else 0)
PYEOF
  done
}

# Wrap mode: each fanrun rank (a node) runs one torchrun agent with its FANSTORE_RANK.
p=$(port)
mkdir -p "$S/wrap"
timeout -k 10 300 mpiexec -n 2 "$FANRUN" --data "$S/ds" --mount "$MNT" --local-dir "$S/local" -- \
  sh -c "exec $TR --node_rank \$FANSTORE_RANK --master_port $p --log_dir $S/logs/wrap\$FANSTORE_RANK $TRAIN $MNT $S/wrap" \
  >"$S/wrap.log" 2>&1
rc=$?
[ $rc = 0 ] && ok || bad "wrap mode: exit $rc: $(tail -5 "$S/wrap.log")"
compare "$S/wrap" "wrap mode"

# Attach mode: a served job, and torchrun agents attached to it by their own mpiexec.
p=$(port)
mkdir -p "$S/attach"
mpiexec -n 2 "$FANRUN" serve --data "$S/ds" --mount "$MNT" --local-dir "$S/local2" --job tr$$ \
  >"$S/serve.log" 2>&1 &
for i in $(seq 1 100); do "$FANRUN" attach --job tr$$ -- true 2>/dev/null && break; sleep 0.2; done
timeout -k 10 300 mpiexec -n 2 "$FANRUN" attach --job tr$$ -- \
  sh -c "exec $TR --node_rank \$FANSTORE_RANK --master_port $p --log_dir $S/logs/attach\$FANSTORE_RANK $TRAIN $MNT $S/attach" \
  >"$S/attach.log" 2>&1
rc=$?
[ $rc = 0 ] && ok || bad "attach mode: exit $rc: $(tail -5 "$S/attach.log")"
"$FANRUN" stop --job tr$$ >/dev/null 2>&1
wait
compare "$S/attach" "attach mode"
finish
