#!/usr/bin/env bash
# A member larger than 4 GiB (sparse source file, so the test costs little disk) packs,
# verifies and reads back byte-identical.
FANSTORE=$1
. "$(dirname "$0")/lib.sh"
S=$SCRATCH
mkdir -p "$S/src"
truncate -s $((4 * 1024 * 1024 * 1024 + 4096)) "$S/src/huge.bin"
printf 'head' | dd of="$S/src/huge.bin" conv=notrunc status=none
printf 'tail' >>"$S/src/huge.bin"
printf 'small' >"$S/src/small.txt"
expect_rc 0 "pack a > 4 GiB member" -- "$FANSTORE" pack -q "$S/src" "$S/data"
expect_rc 0 "stat" -- "$FANSTORE" stat "$S/data" huge.bin
grep -q "Size: $((4 * 1024 * 1024 * 1024 + 4100))" "$S/out" && ok || bad "size > 4 GiB kept: $(cat "$S/out")"
expect_rc 0 "verify" -- "$FANSTORE" verify -q "$S/data"
if "$FANSTORE" cat "$S/data" huge.bin | cmp -s - "$S/src/huge.bin"; then ok; else bad "cat of the > 4 GiB member differs"; fi
finish
