#!/usr/bin/env bash
# Packing benchmark: on the same generated trees, in one run, measures packing MB/s and the
# size ratio of `fanstore pack` against `tar cf` and `mksquashfs` (default gzip), and, on the
# compressible tree, against zlib level 6 applied per file (Python's zlib, the C library).
# Page cache warm (the trees were just written); each timing ends with `sync`, so every tool
# pays for getting its output to disk (fanstore fsyncs its partitions; tar and mksquashfs
# would otherwise leave theirs in the page cache). Writes bench/results/pack.json.
# Each figure is the median of --repeat runs (default 3): the disk's writeback makes single
# runs vary by 2-3x on this machine.
#
# --archives (alone: only this part) packs from archives, as ImageNet ships: one tar of
# class tars (train.tar holding n01440764.tar, ...). Alternating in each round:
#   straight       fanstore pack --untar-nested train.tar OUT
#   extract+pack   tar x of train.tar, then of every class tar (rm'd), then fanstore pack
#   archivemount   (Debian's FUSE mount of a tar, through libarchive; a flat tar of the
#                  same tree, since it does not open nested tars) fanstore pack of the mount
#   straight flat  fanstore pack of that flat tar
# For each: time (median), bytes read (the tools' inputs), and files and bytes created on
# the source's file system outside OUT (counted). Writes bench/results/pack_archives.json.
# Usage: bench/pack.sh [--files N] [--text-files N] [--work DIR] [--repeat N]
#                      [--archives [--archive-files N]]
set -euo pipefail
cd "$(dirname "$0")/.."
files=20000 text_files=3000 work=bench/work repeat=3 archives=0 archive_files=10000
while [ $# -gt 0 ]; do
  case $1 in
    --archives) archives=1; shift ;;
    --archive-files) archive_files=$2; shift 2 ;;
    --files) files=$2; shift 2 ;;
    --text-files) text_files=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "pack.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
FANSTORE=build/release/bin/fanstore
[ -x $FANSTORE ] || ci/build.sh release >/dev/null
now() { date +%s.%N; }
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

if [ "$archives" = 1 ]; then
  command -v archivemount >/dev/null || { echo "pack.sh: archivemount missing (apt-get install archivemount)" >&2; exit 1; }
  mkdir -p "$work" bench/results
  src=$work/imagenet-$archive_files
  [ -d "$src" ] || bench/gen_dataset.py imagenet "$src" --files "$archive_files" --classes 100 --mean-kb 100
  A=$work/archives-$archive_files
  if [ ! -f "$A/train.tar" ]; then
    rm -rf "$A" && mkdir -p "$A/classes"
    for c in $(ls "$src/train"); do tar -C "$src/train/$c" -cf "$A/classes/$c.tar" .; done
    tar -C "$A/classes" -cf "$A/train.tar" . && rm -rf "$A/classes"
    tar -C "$src/train" -cf "$A/flat.tar" .
  fi
  tree_bytes=$(du -sb --apparent-size "$src/train" | cut -f1)
  tar_bytes=$(stat -c %s "$A/train.tar")
  flat_bytes=$(stat -c %s "$A/flat.tar")
  X=$A/x M=$A/mnt OUT=$work/out-archives.fs
  entries() { find "$A" -mindepth 1 | wc -l; }  # what the source's file system holds
  straight() { $FANSTORE pack -q --public --untar-nested "$A/train.tar" "$OUT"; }
  extract_pack() {
    mkdir -p "$X" && tar -C "$X" -xf "$A/train.tar"
    for t in "$X"/*.tar; do mkdir "${t%.tar}" && tar -C "${t%.tar}" -xf "$t" && rm "$t"; done
    $FANSTORE pack -q --public "$X" "$OUT"
  }
  mount_pack() {
    mkdir -p "$M" && archivemount -o readonly "$A/flat.tar" "$M"
    $FANSTORE pack -q --public "$M" "$OUT"; local rc=$?
    fusermount -u "$M"; rmdir "$M"; return $rc
  }
  straight_flat() { $FANSTORE pack -q --public "$A/flat.tar" "$OUT"; }
  declare -A T C W
  methods=(straight extract_pack mount_pack straight_flat)
  cat "$A/train.tar" "$A/flat.tar" >/dev/null  # page cache warm for every method
  for r in $(seq "$repeat"); do
    # alternate: each round starts with a different method
    for k in $(seq 0 3); do
      m=${methods[$(((k + r) % 4))]}
      rm -rf "$OUT" "$X"; sync
      before=$(entries)
      t0=$(now); $m >/dev/null; sync; t1=$(now)
      C[$m]=$(($(entries) - before)); W[$m]=$( [ -d "$X" ] && du -sb "$X" | cut -f1 || echo 0)
      T[$m]="${T[$m]:-} $(echo "$t1 - $t0" | bc -l)"
      rm -rf "$OUT" "$X"
    done
  done
  declare -A READ=([straight]=$tar_bytes [extract_pack]=$((tar_bytes * 2 + tree_bytes))
                   [mount_pack]=$flat_bytes [straight_flat]=$flat_bytes)
  base=$(printf '%s\n' ${T[straight]} | median)
  printf '%-14s %9s %8s %12s %14s %14s\n' method seconds "vs straight" "bytes read" "files created" "bytes created"
  res=()
  for m in "${methods[@]}"; do
    s=$(printf '%s\n' ${T[$m]} | median)
    printf '%-14s %9.2f %8.2fx %12s %14s %14s\n' "$m" "$s" "$(echo "$s / $base" | bc -l)" "${READ[$m]}" "${C[$m]}" "${W[$m]}"
    res+=("{\"method\": \"$m\", \"seconds\": $s, \"runs\": [$(echo ${T[$m]} | tr ' ' ',')], \"bytes_read\": ${READ[$m]}, \"files_created\": ${C[$m]}, \"bytes_created\": ${W[$m]}}")
  done
  {
    echo "{\"benchmark\": \"pack_archives\", \"date\": \"$(date -u +%FT%TZ)\", \"cores\": $(nproc), \"files\": $archive_files, \"classes\": 100, \"tree_bytes\": $tree_bytes, \"command\": \"bench/pack.sh --archives --archive-files $archive_files --repeat $repeat\", \"results\": ["
    (IFS=,; echo "${res[*]}")
    echo "]}"
  } >bench/results/pack_archives.json
  echo "wrote bench/results/pack_archives.json"
  exit 0
fi
command -v mksquashfs >/dev/null || { echo "pack.sh: mksquashfs missing (ci/install-deps.sh)" >&2; exit 1; }
mkdir -p "$work" bench/results
img=$work/imagenet-$files txt=$work/text-$text_files
[ -d "$img" ] || bench/gen_dataset.py imagenet "$img" --files "$files" --classes 100 --mean-kb 100
[ -d "$txt" ] || bench/gen_dataset.py text "$txt" --files "$text_files" --mean-kb 64
# Warm the page cache for both trees so every tool reads from memory.
cat $(find "$img" "$txt" -type f) >/dev/null 2>&1 || find "$img" "$txt" -type f -exec cat {} + >/dev/null

results=()
report() {  # report TREE NAME SECONDS OUTPUT_BYTES INPUT_BYTES
  printf '%-10s %-28s %8.2f s %9.1f MB/s  ratio %.3f\n' "$(basename "$1" | cut -d- -f1)" "$2" \
    "$3" "$(echo "$5 / $3 / 1000000" | bc -l)" "$(echo "$4 / $5" | bc -l)"
  results+=("{\"tree\": \"$(basename "$1")\", \"tool\": \"$2\", \"seconds\": $3, \"input_bytes\": $5, \"output_bytes\": $4, \"runs\": $repeat}")
}
measure() {  # measure TREE NAME OUTPUT CMD...: median of $repeat runs, each ending with sync
  local tree=$1 name=$2 out=$3; shift 3
  local times=() bytes t0 t1
  for _ in $(seq "$repeat"); do
    rm -rf "$out"
    sync
    t0=$(now); "$@" >/dev/null 2>&1; sync; t1=$(now)  # every tool pays for durable output
    times+=("$(echo "$t1 - $t0" | bc -l)")
    bytes=$(du -sb "$out" | cut -f1)
  done
  rm -rf "$out"
  report "$tree" "$name" "$(printf '%s\n' "${times[@]}" | median)" "$bytes" "$(du -sb --apparent-size "$tree" | cut -f1)"
}
zlib6() {  # per-file zlib level 6, one thread, output size to $2
  /usr/bin/python3 - "$1" "$2" <<'PY'
import os, sys, zlib
total = 0
for root, _, names in os.walk(sys.argv[1]):
    for n in names:
        with open(os.path.join(root, n), "rb") as f:
            total += len(zlib.compress(f.read(), 6))
with open(sys.argv[2], "wb") as f:
    f.truncate(total)  # sparse placeholder of the compressed size, for du --apparent-size
PY
}
echo "tree       tool                           time        rate      size/input"
for tree in "$img" "$txt"; do
  measure "$tree" "fanstore pack (auto)" "$work/out.fs" $FANSTORE pack -q "$tree" "$work/out.fs"
  measure "$tree" "fanstore pack (auto, 1 thr)" "$work/out.fs" $FANSTORE pack -q -t 1 "$tree" "$work/out.fs"
  measure "$tree" "tar cf" "$work/out.tar" tar cf "$work/out.tar" -C "$tree" .
  measure "$tree" "mksquashfs (gzip)" "$work/out.sqfs" mksquashfs "$tree" "$work/out.sqfs" -noappend -quiet
done
for level in 1 3; do
  measure "$txt" "fanstore pack -c $level" "$work/out.fs" $FANSTORE pack -q -c $level "$txt" "$work/out.fs"
  measure "$txt" "fanstore pack -c $level (1 thr)" "$work/out.fs" $FANSTORE pack -q -t 1 -c $level "$txt" "$work/out.fs"
done
# zlib-6 output is a sparse file of the compressed size: report its apparent size.
times=()
for _ in $(seq "$repeat"); do
  t0=$(now); zlib6 "$txt" "$work/out.zlib"; sync; t1=$(now)
  times+=("$(echo "$t1 - $t0" | bc -l)")
done
report "$txt" "zlib -6 per file (1 thr)" "$(printf '%s\n' "${times[@]}" | median)" \
  "$(stat -c %s "$work/out.zlib")" "$(du -sb --apparent-size "$txt" | cut -f1)"
rm -f "$work/out.zlib"
{
  echo "{\"benchmark\": \"pack\", \"date\": \"$(date -u +%FT%TZ)\", \"cores\": $(nproc), \"results\": ["
  (IFS=,; echo "${results[*]}")
  echo "]}"
} >bench/results/pack.json
echo "wrote bench/results/pack.json"
