#!/usr/bin/env bash
# The planner over the libc of four Debian releases (11: glibc 2.31, 12: 2.36, 13: 2.41,
# unstable: 2.43) and Debian 11's libpthread, through `fanrun doctor --libc FILE --json`: no refused site of interest
# in any, and, for each libc whose build-id the golden file names, exactly its counts.
# The libc files come from the Debian roots of ci/debian-root.sh (made before CTest by
# ci/test.sh); on aarch64 from the arm64 libc roots ci/arm64.sh unpacks (FANSTORE_ROOTS
# names where). A release without a root is skipped with its reason, and the test is
# skipped (77) when none is there.
# Usage: libc_corpus_test.sh FANRUN GOLDEN
set -uo pipefail
fanrun=$1 golden=$2
roots=${FANSTORE_ROOTS:-/var/cache/fanstore-roots}
multiarch=$(uname -m)-linux-gnu
fail=0 checked=0
field() { python3 -c 'import json,sys; d=json.load(sys.stdin)["libc"]; print(*(d[k] if d[k] != "" else "?" for k in sys.argv[1:]))' "$@"; }
# (Debian 11's libpthread.so.0 too: before glibc 2.34 it has system-call wrappers of its
# own, which the patcher patches beside libc's; it is named bullseye/libpthread.)
for entry in bullseye bullseye/libpthread bookworm trixie sid; do
  suite=${entry%%/*}
  file=libc.so.6
  [ "$entry" = "$suite" ] || file=${entry#*/}.so.0
  if [ "$suite" = bookworm ] && grep -q '^VERSION_CODENAME=bookworm' /etc/os-release; then
    libc=/lib/$multiarch/$file
  else
    libc=$roots/$suite/lib/$multiarch/$file
  fi
  suite=$entry
  if [ ! -e "$libc" ]; then
    maker="ci/debian-root.sh ${suite%%/*}"
    [ "$multiarch" = x86_64-linux-gnu ] || maker=ci/arm64.sh
    echo "libc-corpus: $suite: skipped, no $libc (make it with $maker)"
    continue
  fi
  json=$("$fanrun" doctor --libc "$libc" --json)
  rc=$?
  [ $rc -le 1 ] || { echo "libc-corpus: $suite: FAILED: doctor exit $rc"; fail=1; continue; }
  read -r version build_id sites patched relocated uninteresting frame refused <<<"$(
    field version build_id sites patched relocated uninteresting original_frame refused <<<"$json")"
  got="$sites $patched $relocated $uninteresting $frame $refused"
  checked=$((checked + 1))
  echo "libc-corpus: $suite: glibc $version: sites patched relocated uninteresting original-frame refused = $got"
  if [ "$refused" != 0 ]; then
    echo "libc-corpus: $suite: FAILED: $refused refused site(s) of interest:"
    python3 -c 'import json,sys; [print("  ", s) for s in json.load(sys.stdin)["libc"]["refused_sites"]]' <<<"$json"
    fail=1
  fi
  want=$(awk -v s="$suite" -v b="$build_id" '$1 == s && $3 == b {print $4, $5, $6, $7, $8, $9}' "$golden")
  if [ -z "$want" ]; then
    echo "libc-corpus: $suite: build-id $build_id is not in the golden file: counts not pinned"
  elif [ "$want" != "$got" ]; then
    echo "libc-corpus: $suite: FAILED: golden $want, got $got"
    fail=1
  fi
done
[ $checked -gt 0 ] || { echo "libc-corpus: skipped: no libc of the four releases here"; exit 77; }
[ $fail = 0 ] && echo "libc-corpus: ok: $checked libc(s), 0 refused sites of interest"
exit $fail
