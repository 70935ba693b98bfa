#!/usr/bin/env bash
# The main job on a small built-in example: generate an ImageNet-like sample (1,000 real
# JPEGs in 10 classes plus a val/ split), pack it, verify it, then run one PyTorch
# DataLoader epoch over it natively and under fanrun at the same path, printing what each
# read and how fast. Usage: ci/demo.sh  (as root on Debian 12)
set -euo pipefail
cd "$(dirname "$0")/.."
ci/install-deps.sh
ci/build.sh release >/dev/null
BIN=build/release/bin
work=${FANSTORE_DEMO_DIR:-/tmp/fanstore-demo}
rm -rf "$work" && mkdir -p "$work"
bench/gen_dataset.py imagenet "$work/imagenet" --files 1100 --classes 10 --mean-kb 60 --real-jpeg
echo "== fanstore pack"
$BIN/fanstore pack --partitions 4 --broadcast 'val/**' "$work/imagenet" "$work/packed"
echo "== fanstore verify"
$BIN/fanstore verify -q "$work/packed"
echo "== fanstore info"
$BIN/fanstore info "$work/packed" | head -12
echo "== one training epoch over train/, natively"
bench/train_epoch.py "$work/imagenet/train"
echo "== the same command under fanrun (the dataset served from the packed blobs at the same path)"
$BIN/fanrun --data "$work/packed" --stats "$work/stats" -- bench/train_epoch.py "$work/imagenet/train"
/usr/bin/python3 -c "
import json
rows = [json.loads(l) for l in open('$work/stats')]
print('fanrun: %d processes (the main one and its DataLoader workers) served %d opens, %d stats'
      ' and %.1f MiB from the packed blobs; %d damaged members'
      % (len(rows), sum(r['opens'] for r in rows), sum(r['stats'] for r in rows),
         sum(r['bytes'] for r in rows) / 2**20, sum(r['damaged'] for r in rows)))"
