# Helpers shared by the ci/ scripts; source it. Each is safe under `set -euo pipefail`: a
# pipeline that may legitimately find nothing (a grep with no match, a missing file) ends
# in `|| true` or is written so that it cannot fail.

# run_with_progress LOG CMD...: runs CMD with its output in LOG (on a terminal, shown as it
# comes as well) and, every FANSTORE_PROGRESS_SECONDS (default 30) s, says it is still
# running, with the build's last percentage when LOG has one. Returns CMD's status; on
# failure prints LOG's last lines.
run_with_progress() {
  local log=$1
  shift
  if [ -t 1 ]; then
    "$@" 2>&1 | tee "$log"
    return "${PIPESTATUS[0]}"
  fi
  local every=${FANSTORE_PROGRESS_SECONDS:-30}
  "$@" >"$log" 2>&1 &
  local pid=$! waited=0 pct
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    waited=$((waited + 1))
    if [ $((waited % every)) -eq 0 ]; then
      # (no percentage yet while packages install: grep finds nothing, which is fine)
      pct=$({ grep -o '^\[ *[0-9]*%\]' "$log" || true; } | tail -1 | tr -d '[] ')
      echo "   ... still running after ${waited} s${pct:+ (build $pct)}"
    fi
  done
  local rc=0
  wait "$pid" || rc=$?
  [ "$rc" -eq 0 ] || { echo "failed (exit $rc); the last lines of $log:"; tail -20 "$log"; }
  return "$rc"
}

# apt_mirror [APT_DIR]: prints the Debian mirror that APT_DIR's sources name (default
# $FANSTORE_APT_DIR, else /etc/apt): the first non-security URI of the deb822
# sources.list.d/*.sources, else the first `deb` line of a one-line sources.list or
# sources.list.d/*.list. When there is none, says so on stderr and returns 1.
apt_mirror() {
  local dir=${1:-${FANSTORE_APT_DIR:-/etc/apt}} f m=""
  for f in "$dir"/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    m=$(awk 'tolower($1) == "uris:" {for (i = 2; i <= NF; i++) if ($i !~ /security/) {print $i; exit}}' "$f")
    [ -z "$m" ] || break
  done
  if [ -z "$m" ]; then
    for f in "$dir/sources.list" "$dir"/sources.list.d/*.list; do
      [ -f "$f" ] || continue
      m=$(awk '$1 == "deb" {for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) {if ($i !~ /security/) {print $i; exit} next}}' "$f")
      [ -z "$m" ] || break
    done
  fi
  [ -n "$m" ] || { echo "no Debian mirror in $dir's sources" >&2; return 1; }
  echo "$m"
}

# ci_stage NAME CMD...: one stage of ci/test.sh. Runs CMD with its output shown and
# appended to $CI_LOG for the closing count; a stage that fails says so in a line of its
# own and is added to CI_FAILED_STAGES as NAME:FAILURES-ITS-OUTPUT-COUNTED; every stage ends
# with a line of how long it took. Returns 0.
CI_FAILED_STAGES=()
ci_stage() {
  local name=$1 rc=0 t0=$SECONDS
  shift
  "$@" 2>&1 | tee "$CI_LOG.stage" || rc=$?  # (pipefail: CMD's status)
  cat "$CI_LOG.stage" >>"$CI_LOG"
  echo "ci: stage $name took $((SECONDS - t0)) s"
  [ "$rc" -ne 0 ] || return 0
  echo "ci: stage $name failed (exit $rc)"
  CI_FAILED_STAGES+=("$name:$(ci_counted_failures "$CI_LOG.stage")")
}

# ci_counted_failures LOG: how many failures LOG reports in the lines the closing count
# reads (CTest's "N tests failed out of M", the fuzz targets' "fuzz: ... failed").
ci_counted_failures() {
  local t f
  t=$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of.*/\1/p' "$1" | awk '{s += $1} END {print s + 0}')
  f=$({ grep -c '^fuzz: .* failed' "$1" || true; })
  echo $((t + f))
}

# ci_failure_digest LOG: the reasons the failed checks gave, gathered from LOG for the last
# screen of the run, where a reader of only its tail sees them: each shell check's `FAIL:`
# line, each GoogleTest failure with the lines that follow it, and each hung command's
# first lines (tests/bin/lib.sh), at most 60 lines of at most 300 characters. Nothing when
# no check failed.
ci_failure_digest() {
  local digest
  digest=$(awk '
    /^FAIL: |^still running after / { n = 3 }
    /: Failure$/ { n = 4 }
    /^\[  FAILED  \] .*\(/ { n = 1 }
    n > 0 { print substr($0, 1, 300); n-- }' "$1" | head -60 || true)  # (head may cut awk short)
  [ -z "$digest" ] || printf 'ci: why the failed checks failed (the first 60 lines):\n%s\n' "$digest"
}

# ci_closing_line LOG [STAGE:COUNTED]...: the closing lines of ci/test.sh. Counts CTest's
# tests (passed, failed, skipped) and the fuzz targets in LOG; a failed stage whose own
# output counted no failure (it failed before or outside its tests: a root not made, a
# build error) is one failure more. Names the failed stages in a line of their own before
# the last line, `ci: N passed, N failed, N skipped`.
ci_closing_line() {
  local log=$1 passed failed skipped fuzz_ok fuzz_bad total names="" extra=0 s
  shift
  total=$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\1 \2/p' "$log" |
    awk '{f += $1; n += $2} END {print n - f, f}')
  read -r passed failed <<<"${total:-0 0}"
  fuzz_ok=$({ grep -c '^fuzz: .*, 0 crashes$' "$log" || true; })
  fuzz_bad=$({ grep -c '^fuzz: .* failed' "$log" || true; })
  skipped=$({ grep -c 'Test *#[0-9]*: .*\*\*\*Skipped' "$log" || true; })
  for s in "$@"; do
    names+=" ${s%%:*}"
    [ "${s##*:}" -gt 0 ] || extra=$((extra + 1))
  done
  [ -z "$names" ] || echo "ci: stages failed:$names"
  echo "ci: $((passed - skipped + fuzz_ok)) passed, $((failed + fuzz_bad + extra)) failed, $skipped skipped"
  [ -z "$names" ]
}

# arm64_libc_root SUITE: prints the directory holding SUITE's arm64 base system and, with
# libc6-dev unpacked into it, its glibc development files: `debootstrap --foreign` makes
# it once under $FANSTORE_ROOTS (default /var/cache/fanstore-roots), downloading and
# unpacking only (no emulation). The libc corpus and the aarch64 bundle's old glibc.
arm64_libc_root() {
  local suite=$1 roots=${FANSTORE_ROOTS:-/var/cache/fanstore-roots}
  local dir=$roots/$suite-arm64-libc mirror deb
  mkdir -p "$roots"
  (
    flock 9  # (one maker at a time)
    [ ! -e "$dir/.fanstore-complete" ] || exit 0
    mirror=$(apt_mirror) || exit 1
    rm -rf "$dir"
    debootstrap --foreign --arch=arm64 --variant=minbase --include=libc6-dev "$suite" "$dir" \
      "$mirror" >"$dir.log" 2>&1 ||
      { echo "arm64_libc_root: debootstrap --foreign $suite failed; see $dir.log" >&2; exit 1; }
    for deb in "$dir"/var/cache/apt/archives/libc6-dev_*_arm64.deb \
      "$dir"/var/cache/apt/archives/linux-libc-dev_*_arm64.deb; do
      [ -f "$deb" ] && dpkg-deb -x "$deb" "$dir"
    done
    touch "$dir/.fanstore-complete"
  ) 9>"$dir.lock" || return 1
  echo "$dir"
}
