#!/usr/bin/env bash
# The main job on a small built-in example: generate an ImageNet-like sample (2,000 files),
# pack it, verify it, and show what is inside. Usage: ci/demo.sh  (as root on Debian 12)
set -euo pipefail
cd "$(dirname "$0")/.."
ci/install-deps.sh
ci/build.sh release >/dev/null
FANSTORE=build/release/bin/fanstore
work=${FANSTORE_DEMO_DIR:-/tmp/fanstore-demo}
rm -rf "$work" && mkdir -p "$work"
bench/gen_dataset.py imagenet "$work/imagenet" --files 2000 --classes 20
echo "== fanstore pack"
$FANSTORE pack --partitions 4 --broadcast 'val/**' "$work/imagenet" "$work/packed"
echo "== fanstore verify"
$FANSTORE verify "$work/packed"
echo "== fanstore info"
$FANSTORE info "$work/packed"
echo "== fanstore ls (first entries of train/)"
first_class=$($FANSTORE ls "$work/packed" train | head -1)
$FANSTORE ls -l "$work/packed" "train/$first_class" | head -5
echo "== fanstore cat of one member equals the source file"
member=$($FANSTORE ls "$work/packed" "train/$first_class" | head -1)
$FANSTORE cat "$work/packed" "train/$first_class/$member" | cmp - "$work/imagenet/train/$first_class/$member" \
  && echo "identical: train/$first_class/$member"
