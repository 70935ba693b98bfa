#!/usr/bin/env bash
# The README's set-up scripts on the machines a newcomer has: ci/lib.sh's helpers with
# output to a file (no terminal), apt sources written either way, a failing stage named
# in the closing lines; the tests' watchdog on a hung command; and no script under
# `pipefail` assigns from a grep that may match nothing without saying so.
# Usage: ci_scripts_test.sh SOURCE_DIR
set -u
src=$1
. "$(dirname "$0")/bin/lib.sh"

# --- run_with_progress, output to a file: a slow command before any build percentage.
cat >"$SCRATCH/slow.sh" <<'EOF'
set -euo pipefail
. "$1/ci/lib.sh"
run_with_progress "$2" sh -c 'sleep 3; echo installing; sleep 1; echo "[ 42%] Building"; sleep 2; exit '"$3"
EOF
rc=0
FANSTORE_PROGRESS_SECONDS=1 bash "$SCRATCH/slow.sh" "$src" "$SCRATCH/slow.log" 0 >"$SCRATCH/progress.out" 2>&1 </dev/null || rc=$?
if [ "$rc" -eq 0 ]; then ok; else bad "run_with_progress to a file: exit $rc: $(head -c 300 "$SCRATCH/progress.out")"; fi
if grep -q 'still running after [0-9]* s$' "$SCRATCH/progress.out"; then ok; else bad "run_with_progress: no progress line before a build percentage: $(cat "$SCRATCH/progress.out")"; fi
if grep -q 'still running after [0-9]* s (build 42%)' "$SCRATCH/progress.out"; then ok; else bad "run_with_progress: the build's percentage not shown: $(cat "$SCRATCH/progress.out")"; fi
if grep -q 'Building' "$SCRATCH/slow.log"; then ok; else bad "run_with_progress: the command's output is not in its log"; fi
rc=0
FANSTORE_PROGRESS_SECONDS=1 bash "$SCRATCH/slow.sh" "$src" "$SCRATCH/slow.log" 3 >"$SCRATCH/progress.out" 2>&1 </dev/null || rc=$?
if [ "$rc" -eq 3 ] && grep -q '^failed (exit 3); the last lines of' "$SCRATCH/progress.out"; then ok
else bad "run_with_progress: a failing command: exit $rc, output: $(cat "$SCRATCH/progress.out")"; fi

# --- apt_mirror and debian-root.sh --mirror: deb822, one-line, neither.
apt=$SCRATCH/apt
mkdir -p "$apt/classic/sources.list.d" "$apt/deb822/sources.list.d" "$apt/none/sources.list.d"
cat >"$apt/classic/sources.list" <<'EOF'
# written by debootstrap or the installer
deb http://security.example.org/debian-security bookworm-security main
deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] http://mirror.example.org/debian bookworm main
EOF
cat >"$apt/deb822/sources.list.d/debian.sources" <<'EOF'
Types: deb
URIs: http://mirror822.example.org/debian
Suites: bookworm bookworm-updates

Types: deb
URIs: http://security822.example.org/debian-security
Suites: bookworm-security
EOF
check_mirror() {  # check_mirror DIR WANT (WANT empty: no mirror, exit 1 with one line)
  local out rc=0
  out=$(FANSTORE_APT_DIR=$apt/$1 bash "$src/ci/debian-root.sh" --mirror 2>"$SCRATCH/err") || rc=$?
  if [ -n "$2" ]; then
    if [ "$rc" -eq 0 ] && [ "$out" = "$2" ]; then ok; else bad "debian-root.sh --mirror with $1 sources: exit $rc, '$out', expected '$2'; $(cat "$SCRATCH/err")"; fi
  else
    if [ "$rc" -eq 1 ] && [ -z "$out" ]; then expect_err_line "no Debian mirror" "debian-root.sh --mirror without sources"
    else bad "debian-root.sh --mirror without sources: exit $rc, '$out'"; fi
  fi
}
check_mirror classic http://mirror.example.org/debian
check_mirror deb822 http://mirror822.example.org/debian
check_mirror none ""

# --- ci_stage and ci_closing_line: a stage that fails outside its tests is named and
# counted; one whose tests failed is counted by its tests.
cat >"$SCRATCH/stages.sh" <<'EOF'
set -euo pipefail
. "$1/ci/lib.sh"
CI_LOG=$2
: >"$CI_LOG"
ci_stage passing sh -c 'echo "100% tests passed, 0 tests failed out of 4"'
ci_stage root-made sh -c 'echo "debootstrap: no mirror"; exit 1'
ci_stage tests-red sh -c 'echo "1/4 Test #1: shell ***Failed"; echo "FAIL: the check: exit 2"
  echo "stderr: why"; echo "75% tests passed, 1 tests failed out of 4"; exit 8'
ci_stage fuzz sh -c 'echo "fuzz: manifest: 10 runs, 0 crashes"'
ci_failure_digest "$CI_LOG"
ci_closing_line "$CI_LOG" "${CI_FAILED_STAGES[@]}"
EOF
rc=0
bash "$SCRATCH/stages.sh" "$src" "$SCRATCH/ci.log" >"$SCRATCH/stages.out" 2>&1 || rc=$?
tail -2 "$SCRATCH/stages.out" >"$SCRATCH/closing"
printf 'ci: stages failed: root-made tests-red\nci: 8 passed, 2 failed, 0 skipped\n' >"$SCRATCH/closing.want"
if [ "$rc" -eq 1 ]; then ok; else bad "ci_closing_line with failed stages: exit $rc, expected 1"; fi
expect_same "$SCRATCH/closing" "$SCRATCH/closing.want" "the closing lines name the failed stages and count the one that ran no test"
sed -n '/^ci: why the failed checks failed/,/^ci: stages failed/p' "$SCRATCH/stages.out" >"$SCRATCH/digest"
printf '%s\n' "ci: why the failed checks failed (the first 60 lines):" "FAIL: the check: exit 2" \
  "stderr: why" "75% tests passed, 1 tests failed out of 4" "ci: stages failed: root-made tests-red" >"$SCRATCH/digest.want"
expect_same "$SCRATCH/digest" "$SCRATCH/digest.want" "the failed checks' reasons come before the closing lines"
if grep -q '^ci: stage root-made failed (exit 1)$' "$SCRATCH/stages.out"; then ok; else bad "a failed stage has no line of its own: $(cat "$SCRATCH/stages.out")"; fi
n_took=$(grep -cE '^ci: stage (passing|root-made|tests-red|fuzz) took [0-9]+ s$' "$SCRATCH/stages.out")
if [ "$n_took" = 4 ]; then ok; else bad "each stage's time in a line: $n_took of 4: $(cat "$SCRATCH/stages.out")"; fi
cat >"$SCRATCH/green.sh" <<'EOF'
set -euo pipefail
. "$1/ci/lib.sh"
CI_LOG=$2
: >"$CI_LOG"
ci_stage passing sh -c 'echo "100% tests passed, 0 tests failed out of 4"'
ci_failure_digest "$CI_LOG"
ci_closing_line "$CI_LOG" "${CI_FAILED_STAGES[@]}"
EOF
expect_rc 0 "ci_closing_line with every stage green" -- bash "$SCRATCH/green.sh" "$src" "$SCRATCH/ci.log"
if [ "$(tail -1 "$SCRATCH/out")" = "ci: 4 passed, 0 failed, 0 skipped" ]; then ok; else bad "green closing line: $(cat "$SCRATCH/out")"; fi
if ! grep -q '^ci: why' "$SCRATCH/out"; then ok; else bad "a digest with nothing failed: $(cat "$SCRATCH/out")"; fi

# --- The tests' own watchdog (tests/bin/lib.sh): a command still running after HANG_S
# seconds, its child too, is killed and named with the stacks of its processes; one that
# ends in time keeps its own status.
cat >"$SCRATCH/hang.sh" <<'EOF'
. "$1/tests/bin/lib.sh"
HANG_S=1 watched bash -c 'sleep 59.7; true'
echo "status $?"
HANG_S=30 watched bash -c 'exit 3'
echo "status $?"
EOF
bash "$SCRATCH/hang.sh" "$src" >"$SCRATCH/hang.out" 2>&1
if grep -q '^still running after 1 s, killed; the stacks of its processes:$' "$SCRATCH/hang.out" &&
  grep -q '^== [0-9]*: .*sleep 59.7 $' "$SCRATCH/hang.out" && grep -q '^status 124$' "$SCRATCH/hang.out" &&
  grep -q '^status 3$' "$SCRATCH/hang.out"; then ok; else bad "the watchdog: $(cat "$SCRATCH/hang.out")"; fi
# (under qemu-user a process's command line starts with the emulator's)
if ! pgrep -f 'sleep 59[.]7$' >/dev/null; then ok; else bad "the watchdog left the hung command's child running"; fi

# --- A test whose scratch directory another process removed says so, once, before its
# failures (tests/bin/lib.sh bad), so that a digest names the cause.
bash -c '. "$1/tests/bin/lib.sh"; ok; rm -rf "$SCRATCH"; bad one; bad two; finish' sh "$src" \
  >/dev/null 2>"$SCRATCH/gone.err"
if [ "$(grep -c 'scratch directory .* is gone: removed by another process' "$SCRATCH/gone.err")" = 1 ] &&
  [ "$(sed -n 1p "$SCRATCH/gone.err" | grep -c 'is gone')" = 1 ] && grep -qx 'FAIL: two' "$SCRATCH/gone.err"; then
  ok
else
  bad "a removed scratch directory is said once, first: $(cat "$SCRATCH/gone.err")"
fi

# --- The pattern itself: under pipefail, an assignment from a pipeline with a grep that
# may match nothing ends the script. Each such line in ci/ and bench/ must say `|| true`
# (or count with grep -c ... || true).
while IFS= read -r f; do
  grep -q pipefail "$f" || continue
  while IFS= read -r hit; do
    bad "$f:${hit%%:*}: an assignment from a grep that may match nothing, under pipefail: ${hit#*:}"
  done < <(grep -nE '^[[:space:]]*(local[[:space:]]+)?[A-Za-z_][A-Za-z_0-9]*=\$\(.*\bgrep\b' "$f" | grep -v '|| true' || true)
  ok
done < <(ls "$src"/ci/*.sh "$src"/bench/*.sh "$src"/.ci/run)
finish
