#!/usr/bin/env bash
# Builds the libFuzzer targets (the `fuzz` preset: clang, ASan + UBSan) and runs each for
# SECONDS on a seed corpus made from a small packed dataset: the manifest parser, the
# partition reader, the namespace image's attach and the archive readers. Prints one line per target (runs,
# runs per second, crashes) and, with --json FILE, writes them there too. Exits 1 if any
# target crashed; the input that did is kept in build/fuzz/artifacts/.
# Usage: ci/fuzz.sh [SECONDS] [--json FILE]     (default 20 s per target)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=20
json=""
while [ $# -gt 0 ]; do
  case $1 in
    --json) json=$2; shift 2 ;;
    *) secs=$1; shift ;;
  esac
done
command -v clang++ >/dev/null && compgen -G '/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a' >/dev/null || {
  echo "fuzz: installing clang and libFuzzer"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends clang-14 clang libfuzzer-14-dev libclang-rt-14-dev >/dev/null
}
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j"$(nproc)" >/dev/null
B=build/fuzz
W=$B/work
rm -rf "$W"
mkdir -p "$W/corpus/manifest" "$W/corpus/partition" "$W/corpus/image" "$W/corpus/archive" "$B/artifacts"
# The seed dataset: files raw and deflated, an empty file, directories, a symlink.
mkdir -p "$W/src/a/b" "$W/src/empty"
seq 1 3000 >"$W/src/a/numbers.txt"
head -c 5000 /dev/urandom >"$W/src/a/b/random.bin"
: >"$W/src/a/none"
ln -s a/numbers.txt "$W/src/link"
"$B/bin/fanstore" pack -q --partitions 2 --broadcast 'a/b/**' "$W/src" "$W/ds"
cp "$W/ds/manifest" "$W/corpus/manifest/"
cp "$W"/ds/part-*.fsb "$W/corpus/partition/"
"$B/tests/fuzz/image_seed" "$W/ds" "$W/corpus/image/seed.img"
# Archives of the same tree: GNU and PAX tar, gzip, and a zip when zip is installed.
tar -C "$W/src" -cf "$W/corpus/archive/seed.tar" .
tar -C "$W/src" --format=posix -cf "$W/corpus/archive/seed-pax.tar" .
tar -C "$W/src" -czf "$W/corpus/archive/seed.tgz" .
! command -v zip >/dev/null || (cd "$W/src" && zip -qry "$OLDPWD/$W/corpus/archive/seed.zip" .)
status=0
lines=()
for t in manifest partition image archive; do
  log=$W/$t.log
  rc=0
  "$B/tests/fuzz/${t}_fuzz" -max_total_time="$secs" -print_final_stats=1 -rss_limit_mb=2048 \
    -artifact_prefix="$B/artifacts/${t}-" "$W/corpus/$t" >"$log" 2>&1 || rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  crashes=0
  if [ $rc -ne 0 ]; then
    crashes=1
    status=1
    echo "fuzz: ${t}_fuzz failed (exit $rc); its last lines:" >&2
    tail -30 "$log" >&2
  fi
  echo "fuzz: ${t}_fuzz: ${runs:-0} runs in ${secs} s (${rate:-0}/s), $crashes crashes"
  lines+=("{\"target\": \"${t}_fuzz\", \"seconds\": $secs, \"runs\": ${runs:-0}, \"per_second\": ${rate:-0}, \"crashes\": $crashes}")
done
if [ -n "$json" ]; then
  { echo "{\"date\": \"$(date -u +%F)\", \"targets\": ["; (IFS=,; echo "${lines[*]}"); echo "]}"; } >"$json"
fi
exit $status
