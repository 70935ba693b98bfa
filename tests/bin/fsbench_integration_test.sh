#!/usr/bin/env bash
# fsbench on a small generated tree, natively and under `mpiexec -n 2`: exact counts
# (files read = files listed x epochs), bytes equal to the tree's, valid JSON, error exits.
# Usage: fsbench_integration_test.sh PATH/TO/fsbench SOURCE_DIR
FSBENCH=$1
SRC=$2
. "$(dirname "$0")/lib.sh"
S=$SCRATCH
/usr/bin/python3 "$SRC/bench/gen_dataset.py" imagenet "$S/data" --files 300 --classes 7 --mean-kb 20 >/dev/null
files=$(find "$S/data" -type f | wc -l)
bytes=$(find "$S/data" -type f -printf '%s\n' | awk '{s+=$1} END {print s}')
dirs=$(find "$S/data" -type d | wc -l)

check_json() {  # check_json FILE ITEMS BYTES DESCRIPTION
  /usr/bin/python3 - "$@" <<'PY' && ok || bad "$4: $(cat "$1" | head -c 600)"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["tool"] == "fsbench", d
assert d["items"] == int(sys.argv[2]), (d["items"], sys.argv[2])
assert d["bytes"] == int(sys.argv[3]), (d["bytes"], sys.argv[3])
assert d["errors"] == 0
for op in d["ops"]:
    l = op["latency_ns"]
    assert 0 < l["p50"] <= l["p90"] <= l["p99"] <= l["max"], l
PY
}

expect_rc 0 "--help" -- "$FSBENCH" --help
expect_rc 0 "--version" -- "$FSBENCH" --version
expect_rc 2 "no PATH" -- "$FSBENCH"
expect_rc 2 "bad --op" -- "$FSBENCH" "$S/data" --op write
expect_err_line "unknown operation 'write'" "bad --op names it"
expect_rc 2 "negative --duration" -- "$FSBENCH" "$S/data" --duration -3
expect_err_line "fsbench: --duration: must be a number greater than 0, got '-3'" "bad --duration error"
expect_rc 1 "missing PATH" -- "$FSBENCH" "$S/nope"
expect_err_line "fsbench: $S/nope: No such file or directory" "missing PATH error"

expect_rc 0 "native read, 3 epochs, 2 threads x 2 processes" -- "$FSBENCH" "$S/data" --epochs 3 -t 2 -p 2 --json
check_json "$S/out" $((files * 3)) $((bytes * 3)) "native read counts"
expect_rc 0 "native read, 2 epochs, 2 new processes each" -- "$FSBENCH" "$S/data" --epochs 2 -p 2 --fresh-processes --json
check_json "$S/out" $((files * 2)) $((bytes * 2)) "--fresh-processes counts"
expect_rc 2 "--fresh-processes with --duration" -- "$FSBENCH" "$S/data" --fresh-processes --duration 1
expect_err_line "excludes" "--fresh-processes with --duration is refused"
expect_rc 0 "native mixed, sequential" -- "$FSBENCH" "$S/data" --op mixed --pattern sequential --json
check_json "$S/out" "$files" "$bytes" "mixed counts"
expect_rc 0 "readdir" -- "$FSBENCH" "$S/data" --op readdir --epochs 2 --json
/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["items"] == 2 * int(sys.argv[2]), d' "$S/out" "$dirs" && ok || bad "readdir visits every directory per epoch"
for op in stat open-close read-range; do
  expect_rc 0 "$op" -- "$FSBENCH" "$S/data" --op $op --json
  /usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["items"] == int(sys.argv[2]) and d["errors"] == 0, d' "$S/out" "$files" && ok || bad "$op counts"
done
expect_rc 0 "--files limit" -- "$FSBENCH" "$S/data" --files 50 --json
/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["items"] == 50, d' "$S/out" && ok || bad "--files 50 reads 50"
expect_rc 2 "--latency-every 0" -- "$FSBENCH" "$S/data" --latency-every 0
expect_err_line "fsbench: --latency-every: must be a whole number from 1 to 1048576, got '0' (see fsbench --help)" "bad --latency-every error"
expect_rc 0 "--duration" -- "$FSBENCH" "$S/data" --duration 0.3 --op stat --json
# (No upper bound on the time: with --duration fsbench repeats epochs until the deadline,
# so one that ignored it would never end, and CTest's timeout says so.)
/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["items"] > 0 and d["seconds"] >= 0.25, d' "$S/out" && ok || bad "--duration runs until its deadline"
# Few operations timed: the deadline is still kept (the clock is read every 64 operations).
expect_rc 0 "--duration with --latency-every" -- "$FSBENCH" "$S/data" --duration 0.3 --op stat --latency-every 100000 --json
/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["items"] > 0 and d["seconds"] >= 0.25 and d["config"]["latency_every"] == 100000, d' "$S/out" && ok || bad "--duration with --latency-every 100000 runs until its deadline"
find "$S/data/train" -type f | head -20 >"$S/list"
expect_rc 0 "--files-from" -- "$FSBENCH" "$S/data" --files-from "$S/list" --json
/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["items"] == 20, d' "$S/out" && ok || bad "--files-from reads the list"
expect_rc 0 "human table" -- "$FSBENCH" "$S/data"
grep -qE '^read +[0-9]+ ' "$S/out" && ok || bad "table has a read row"

# Errors are counted and make the exit code non-zero.
echo "$S/data/does-not-exist.JPEG" >>"$S/list"
expect_rc 1 "missing file in the list" -- "$FSBENCH" "$S/data" --files-from "$S/list"

# MPI mode: each rank reads its share; rank 0 reports per-rank and aggregate figures.
if [ -n "${FANSTORE_TEST_SKIP_MPI:-}" ]; then
  skip "MPI mode: $FANSTORE_TEST_SKIP_MPI"
elif command -v mpiexec >/dev/null; then
  "$FSBENCH" "$S/data" --epochs 2 --json >"$S/base.json" 2>/dev/null
  expect_rc 0 "mpiexec -n 2, split" -- mpiexec -n 2 "$FSBENCH" "$S/data" --epochs 2 --json --baseline "$S/base.json"
  check_json "$S/out" $((files * 2)) $((bytes * 2)) "MPI split counts"
  /usr/bin/python3 - "$S/out" "$files" <<'PY' && ok || bad "MPI per-rank rows and aggregate"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["config"]["ranks"] == 2
ranks = d["ranks"]
assert [r["rank"] for r in ranks] == [0, 1]
assert sum(r["items"] for r in ranks) == 2 * int(sys.argv[2])
assert all(r["items"] > 0 for r in ranks)
a = d["aggregate"]
assert a["min_rank_items_per_s"] <= a["max_rank_items_per_s"] and a["efficiency"] > 0
PY
  expect_rc 0 "mpiexec -n 2, no split" -- mpiexec -n 2 "$FSBENCH" "$S/data" --no-split --json
  check_json "$S/out" $((files * 2)) $((bytes * 2)) "MPI no-split: every rank reads everything"
  expect_rc 1 "mpiexec with a missing path" -- mpiexec -n 2 "$FSBENCH" "$S/nope"
else
  skip "MPI mode (no mpiexec on PATH; ci/install-deps.sh installs mpich)"
fi
finish
