#!/usr/bin/env bash
# Scaling of the multi-node runtime, simulated as mpiexec ranks on this machine (each rank
# a "node" with its own local directory):
#   reads    fsbench (whole-file read, 1 thread per rank) under `mpiexec -n N fanrun` for
#            N = 1, 2, 4 and 8 (oversubscribed on 2 cores), first epoch (fetched over MPI)
#            and second epoch (from the node cache), in these modes:
#              local   every rank reads every file, --replicas N: every member is local
#              remote  every rank reads every file, --replicas 1: (N-1)/N of the members
#                      come from other ranks (fetched with their neighbours: --fetch-ahead)
#              alone   as remote, with --fetch-ahead 0: each member fetched by itself
#              share-local / share / share-alone: the same three, but each rank reads only
#                      its 1/N share of a shuffled file list, a new shuffle each epoch (as a
#                      DistributedSampler with set_epoch gives)
#            Every configuration runs --rounds times (default 3), the modes taking turns in
#            each round, after one untimed warm-up run; files/s is the median of the rounds
#            (the VM's speed drifts by a third within minutes), with the lowest and highest.
#   startup  "ready" time, stage-in to ready (exchange+image, the agent's socket, the mount
#            point's directories), Allgatherv bytes per entry and image bytes
#            per entry for namespaces of 10k, 100k and 1.28M entries with 4 ranks.
# Staged partitions and node caches live in the default local directory (/dev/shm).
# Writes bench/results/scale.json; docs/scaling.md projects these to 512 nodes.
# Usage: bench/scale.sh [--files N] [--mean-kb K] [--sizes "10000 100000 1280000"] [--rounds R]
#                       [--work DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
files=8000 mean_kb=32 sizes="10000 100000 1280000" rounds=3 work=bench/work
while [ $# -gt 0 ]; do
  case $1 in
    --files) files=$2; shift 2 ;;
    --mean-kb) mean_kb=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) echo "scale.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case $rounds in ''|*[!0-9]*|0) echo "scale.sh: --rounds $rounds: not a positive whole number" >&2; exit 2 ;; esac
FSBENCH=$PWD/build/release/bin/fsbench FANSTORE=$PWD/build/release/bin/fanstore FANRUN=$PWD/build/release/bin/fanrun
[ -x "$FANRUN" ] || ci/build.sh release >/dev/null
mkdir -p "$work" bench/results
work=$(cd "$work" && pwd)
export FANSTORE_CACHE_DIR=$work/plan-cache
mkdir -p "$FANSTORE_CACHE_DIR" && chmod 700 "$FANSTORE_CACHE_DIR"
tree=$work/scale-$files-$mean_kb
[ -d "$tree" ] || bench/gen_dataset.py imagenet "$tree" --files "$files" --classes 50 --mean-kb "$mean_kb" --val-fraction 0
packed=$tree.packed
drop_format_1 "$packed"
[ -d "$packed" ] || $FANSTORE pack -q "$tree" "$packed" --partitions 16
mnt=$work/scale-mnt
results=$work/scale-results
rm -rf "$results" && mkdir -p "$results"

# Each rank: one epoch (first contact), then one more (node cache warm), as JSON; with SHARE
# set, only the rank's share of each epoch (the lists $results/share.N.RANK.EPOCH).
cat >"$work/scale-reader.sh" <<EOF
#!/bin/sh
for e in 1 2; do
  list=
  [ -n "\$SHARE" ] && list="--files-from $results/share.\$FANSTORE_NODES.\$FANSTORE_RANK.\$e"
  $FSBENCH --op read --epochs 1 --seed \$e \$list --json $mnt/train >$results/\$TAG.e\$e.\$FANSTORE_RANK
done
EOF
chmod +x "$work/scale-reader.sh"
# The shares: per epoch one shuffle of every file, rank r takes every N-th from r.
/usr/bin/python3 - "$tree" "$results" <<'PYEOF'
import os, random, sys
tree, results = sys.argv[1], sys.argv[2]
files = sorted(os.path.relpath(os.path.join(d, f), os.path.join(tree, "train"))
               for d, _, fs in os.walk(os.path.join(tree, "train")) for f in fs)
for epoch in (1, 2):
    random.Random(epoch).shuffle(files)
    for n in (1, 2, 4, 8):
        for r in range(n):
            with open(os.path.join(results, "share.%d.%d.%d" % (n, r, epoch)), "w") as out:
                out.write("".join(f + "\n" for f in files[r::n]))
PYEOF
# Warm-up (untimed): the first run after staging pays for cold caches (the intercept's plan
# cache, the page cache of the binaries), which would land on whichever mode ran first.
FANSTORE_QUIET=1 mpiexec -n 1 "$FANRUN" --data "$packed" --mount "$mnt" \
  -- "$FSBENCH" --op read --epochs 1 "$mnt/train" >/dev/null
for round in $(seq "$rounds"); do
  for n in 1 2 4 8; do
    for mode in local remote alone share-local share share-alone; do
      opts=(--replicas 1)
      case $mode in *local) opts=(--replicas $n) ;; *alone) opts+=(--fetch-ahead 0) ;; esac
      share=
      case $mode in share*) share=1 ;; esac
      echo "reads: round $round of $rounds, $n rank(s), $mode" >&2
      SHARE=$share TAG=$mode.$n.$round FANSTORE_QUIET=1 mpiexec -n $n \
        "$FANRUN" --data "$packed" --mount "$mnt" "${opts[@]}" \
        -- "$work/scale-reader.sh" 2>"$results/$mode.$n.err" || { cat "$results/$mode.$n.err" >&2; exit 1; }
    done
  done
done

# Namespaces of growing size: tiny files (the cost under test is per entry, not per byte).
for size in $sizes; do
  ns=$work/ns-$size
  drop_format_1 "$ns.packed"
  if [ ! -d "$ns.packed" ]; then
    echo "namespace: generating $size entries" >&2
    /usr/bin/python3 - "$ns" "$size" <<'PYEOF'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
per_dir = 1000
for d in range((n + per_dir - 1) // per_dir):
    p = os.path.join(root, "train", "n%08d" % d)
    os.makedirs(p)
    for i in range(min(per_dir, n - d * per_dir)):
        with open(os.path.join(p, "n%08d_%d.JPEG" % (d, i)), "wb") as f:
            f.write(b"x" * (i % 7))
PYEOF
    $FANSTORE pack -q "$ns" "$ns.packed" --partitions 16
    rm -rf "$ns"
  fi
  for n in 1 4; do
    echo "namespace: $size entries, $n rank(s)" >&2
    mpiexec -n $n "$FANRUN" --data "$ns.packed" --mount "$mnt" -- true \
      2>"$results/ns.$size.$n.err"
  done
done

# Attach: 200 exec'd processes (/bin/true) each map the largest namespace image, against
# the same loop natively; the difference per process is the runtime's start-up + attach.
largest=${sizes##* }
loop='s=$(date +%s.%N); i=0; while [ $i -lt 200 ]; do /bin/true; i=$((i+1)); done; e=$(date +%s.%N); echo "$s $e"'
native=$(sh -c "$loop")
under=$(FANSTORE_QUIET=1 "$FANRUN" --data "$work/ns-$largest.packed" --mount "$mnt" -- sh -c "$loop")
echo "$native $under" >"$results/attach"

/usr/bin/python3 - "$results" "$files" "$sizes" "$rounds" <<'PYEOF' | tee bench/results/scale.json
import glob, json, os, re, statistics, sys
results, files, sizes, rounds = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), int(sys.argv[4])
out = {"rounds": rounds, "reads": [], "startup": []}
for n in (1, 2, 4, 8):
    row, rates = {"ranks": n}, {}
    for mode in ("local", "remote", "alone", "share-local", "share", "share-alone"):
        for ep in ("e1", "e2"):
            per_round, errors = [], 0
            rates[(mode, ep)] = per_round
            for r in range(1, rounds + 1):  # a round's files/s: the sum over its ranks
                runs = [json.load(open(f)) for f in
                        glob.glob(os.path.join(results, "%s.%d.%d.%s.*" % (mode, n, r, ep)))]
                per_round.append(round(sum(x["items_per_s"] for x in runs)))
                errors += sum(x["errors"] for x in runs)
            row["%s_%s_files_per_s" % (mode, ep)] = round(statistics.median(per_round))
            row["%s_%s_files_per_s_range" % (mode, ep)] = [min(per_round), max(per_round)]
            row["%s_%s_errors" % (mode, ep)] = errors
    for ep in ("e1", "e2"):
        for mode, base in (("remote", "local"), ("alone", "local"), ("share", "share-local"),
                           ("share-alone", "share-local")):
            key = "%s_vs_%s_%s" % (mode, base, ep)
            row[key] = round(row["%s_%s_files_per_s" % (mode, ep)] / row["%s_%s_files_per_s" % (base, ep)], 3)
            # each round's own ratio (the two modes ran minutes apart at most)
            row[key + "_per_round"] = [round(a / b, 3) for a, b in zip(rates[(mode, ep)], rates[(base, ep)])]
    out["reads"].append(row)
pat = re.compile(r"ready in ([\d.]+) s: staged .* in ([\d.]+) s .*namespace (\d+) entries, .* exchanged \((\d+) B/entry\) in [\d.]+ s, exchange\+image ([\d.]+) s, stage-in to ready ([\d.]+) s; image .* \((\d+) B/entry \+ (\d+) B of path\)")
for size in sizes:
    for n in (1, 4):
        text = open(os.path.join(results, "ns.%s.%d.err" % (size, n))).read()
        m = pat.search(text)
        if not m:
            continue
        out["startup"].append({"ranks": n, "entries": int(m.group(3)), "ready_s": float(m.group(1)),
                               "stage_s": float(m.group(2)), "exchange_image_s": float(m.group(5)),
                               "stage_to_ready_s": float(m.group(6)),
                               "exchange_bytes_per_entry": int(m.group(4)),
                               "image_bytes_per_entry_without_paths": int(m.group(7)),
                               "path_bytes_per_entry": int(m.group(8))})
a = [float(x) for x in open(os.path.join(results, "attach")).read().split()]
out["attach_ms_per_exec"] = round(((a[3] - a[2]) - (a[1] - a[0])) / 200 * 1000, 2)
out["attach_entries"] = int(sizes[-1])
print(json.dumps(out, indent=1))
PYEOF
