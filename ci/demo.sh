#!/usr/bin/env bash
# The main job on a small built-in example: generate an ImageNet-like sample (1,000 real
# JPEGs in 10 classes plus a val/ split), pack it, verify it, then run one PyTorch
# DataLoader epoch over it natively and under fanrun at the same path, printing what each
# read and how fast. Long steps (installing, building) print a progress line at least
# every 30 s. Usage: ci/demo.sh  (as root on Debian 12; the tools end up in
# build/release/bin)
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
step() { echo "== [$(( ($(date +%s) - start) / 60 )) min] $*"; }

. ci/lib.sh  # run_with_progress

mkdir -p build
step "installing the dependencies from Debian's packages (the first time: about 10 minutes)"
run_with_progress build/demo-install.log ci/install-deps.sh
step "building the release preset (the first time: about 20 minutes on 2 cores)"
run_with_progress build/demo-build.log ci/build.sh release
BIN=build/release/bin
work=${FANSTORE_DEMO_DIR:-/tmp/fanstore-demo}
rm -rf "$work" && mkdir -p "$work"
step "generating the sample: 1,000 training JPEGs in 10 classes and 100 for validation"
bench/gen_dataset.py imagenet "$work/imagenet" --files 1100 --classes 10 --mean-kb 60 --real-jpeg
step "fanstore pack: 4 sharded partitions, and val/ in a broadcast partition every node keeps"
$BIN/fanstore pack --partitions 4 --broadcast 'val/**' "$work/imagenet" "$work/packed"
step "fanstore verify: every checksum, and the namespace fanrun will build"
$BIN/fanstore verify "$work/packed"
step "fanstore info: what was packed"
$BIN/fanstore info "$work/packed"
step "one training epoch over train/, natively"
bench/train_epoch.py "$work/imagenet/train"
step "the same command under fanrun: the dataset served from the packed blobs at the same path"
$BIN/fanrun --data "$work/packed" --stats "$work/stats" -- bench/train_epoch.py "$work/imagenet/train"
/usr/bin/python3 -c "
import json
rows = [json.loads(l) for l in open('$work/stats')]
print('fanrun: %d processes (the main one and its DataLoader workers) served %d opens, %d stats'
      ' and %.1f MiB from the packed blobs; %d damaged members'
      % (len(rows), sum(r['opens'] for r in rows), sum(r['stats'] for r in rows),
         sum(r['bytes'] for r in rows) / 2**20, sum(r['damaged'] for r in rows)))"
step "done: the tools are in $(pwd)/$BIN (fanstore, fanrun, fsbench)"
