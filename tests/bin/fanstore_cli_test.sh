#!/usr/bin/env bash
# The fanstore tool as a user runs it: usage, exit codes, one-line errors, and that
# `fanstore cat` of every file and `fanstore ls -lR` agree with the source tree.
# Usage: fanstore_cli_test.sh PATH/TO/fanstore
FANSTORE=$1
. "$(dirname "$0")/lib.sh"
S=$SCRATCH

# A tree with edge cases.
mkdir -p "$S/src/train/c0" "$S/src/train/c1" "$S/src/val" "$S/src/empty dir"
: >"$S/src/empty"
printf x >"$S/src/one"
head -c 4095 /dev/urandom >"$S/src/r4095"
head -c 4096 /dev/urandom >"$S/src/r4096"
head -c 4097 /dev/urandom >"$S/src/r4097"
head -c 12000000 /dev/urandom >"$S/src/big.bin"
seq 1 2000000 >"$S/src/big.txt"
seq 1 2000000 >"$S/src/big.dat"
for i in $(seq 1 40); do head -c $((i * 997)) /dev/urandom >"$S/src/train/c$((i % 2))/img$i.jpg"; done
for i in $(seq 1 10); do seq 1 $((i * 300)) >"$S/src/val/v$i.txt"; done
printf 'sp' >"$S/src/with space"
printf 'nl' >"$S/src/$(printf 'new\nline')"
printf 'hi' >"$S/src/$(printf 'latin\xe9')"
ln -s one "$S/src/link"
ln -s train "$S/src/dirlink"
mkfifo "$S/src/fifo"

expect_rc 0 "--help" -- "$FANSTORE" --help
grep -q "pack" "$S/out" && ok || bad "--help lists pack"
expect_rc 0 "--version" -- "$FANSTORE" --version
grep -qE '^fanstore [0-9]+\.[0-9]+\.[0-9]+$' "$S/out" && ok || bad "--version prints the version"
expect_rc 2 "no subcommand" -- "$FANSTORE"
expect_rc 2 "unknown option" -- "$FANSTORE" pack --bogus "$S/src" "$S/x"
expect_err_line "fanstore: " "usage error is one line"
expect_rc 2 "bad --compress" -- "$FANSTORE" pack --compress 9 "$S/src" "$S/x"
expect_err_line "--compress" "bad --compress names the option"
expect_rc 1 "missing SRC" -- "$FANSTORE" pack "$S/nope" "$S/x"
expect_err_line "fanstore: pack: $S/nope: No such file or directory" "missing SRC error"

expect_rc 0 "pack" -- "$FANSTORE" pack --partitions 3 --broadcast 'val/**' "$S/src" "$S/data"
grep -q "fifo: skipped" "$S/err" && ok || bad "FIFO skipped with a warning"
grep -qE '^packed 61 files, [0-9]+ dirs, 2 symlinks \(1 skipped\) into 4 partitions \(3 sharded \+ 1 broadcast\)' "$S/out" && ok || bad "summary line: $(cat "$S/out")"
expect_rc 1 "pack onto existing OUT" -- "$FANSTORE" pack "$S/src" "$S/data"
expect_err_line "already exists (use --force" "existing OUT error"
expect_rc 0 "pack --force" -- "$FANSTORE" pack --force --partitions 3 --broadcast 'val/**' -q "$S/src" "$S/data"
[ ! -s "$S/out" ] && ok || bad "--quiet prints nothing"

expect_rc 0 "verify" -- "$FANSTORE" verify "$S/data"
grep -q "0 damaged members, 0 bad partitions" "$S/out" && ok || bad "verify summary"
expect_rc 0 "info" -- "$FANSTORE" info "$S/data"
expect_rc 0 "info --json" -- "$FANSTORE" info --json "$S/data"
/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["files"] >= 50 and len(d["partitions"]) == 4 and d["partitions"][3]["broadcast"]' "$S/out" && ok || bad "info --json is valid JSON with the totals"

# Every regular file and symlink: fanstore cat == the source bytes (symlinks followed).
n=0
while IFS= read -r -d '' f; do
  rel=${f#"$S/src/"}
  [ -d "$f" ] && continue  # a symlink to a directory
  "$FANSTORE" cat "$S/data" "$rel" >"$S/cat.out" 2>"$S/cat.err" || bad "cat $rel failed: $(cat "$S/cat.err")"
  expect_same "$S/cat.out" "$f" "cat $rel"
  n=$((n + 1))
done < <(find "$S/src" \( -type f -o -type l \) -print0)
[ "$n" -ge 55 ] && ok || bad "cat compared only $n files"

# ls -lR agrees with the source: same names, modes, sizes and mtimes (ns).
(cd "$S/src" && find . -mindepth 1 ! -type p -printf '%P|%M|%s|%T@\n' | sed -E 's/([0-9]{9})0$/\1/' | LC_ALL=C sort) >"$S/native.ls"
"$FANSTORE" ls -lR "$S/data" >"$S/ls.raw" || bad "ls -lR failed"
/usr/bin/python3 - "$S/ls.raw" >"$S/packed.ls" <<'PY'
import sys, re, calendar, time
entry = re.compile(r'^([-dl][-rwxsStT]{9}) +\d+ +\d+ +(\d+) (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\.(\d{9}) \+0000 (.*)$')
text = open(sys.argv[1], 'rb').read().decode('utf-8', 'surrogateescape')
rows, cur, prev_blank = [], '', True
for line in text.split('\n'):
    m = entry.match(line)
    if m:
        rows.append([cur, m.group(1), m.group(2), m.group(3), m.group(4), m.group(5)])
    elif line == '':
        pass
    elif prev_blank and line.endswith(':'):
        cur = line[:-1].lstrip('/')
    else:
        rows[-1][5] += '\n' + line  # a name with a newline in it
    prev_blank = line == ''
out = []
for cur, mode, size, day, frac, name in rows:
    if mode.startswith('l'):
        name = name.rsplit(' -> ', 1)[0]
    t = calendar.timegm(time.strptime(day, '%Y-%m-%d %H:%M:%S'))
    out.append('%s|%s|%s|%d.%s' % ((cur + '/' + name) if cur else name, mode, size, t, frac))
sys.stdout.buffer.write(''.join(o + '\n' for o in out).encode('utf-8', 'surrogateescape'))
PY
LC_ALL=C sort -o "$S/packed.ls" "$S/packed.ls"
expect_same "$S/packed.ls" "$S/native.ls" "ls -lR metadata equals find -printf of the source"

expect_rc 1 "cat of a missing member" -- "$FANSTORE" cat "$S/data" nope.txt
expect_err_line "fanstore: cat: nope.txt: no such file" "missing member error"
expect_rc 1 "cat of a directory" -- "$FANSTORE" cat "$S/data" train
expect_err_line "is a directory" "cat of a directory error"
expect_rc 0 "stat" -- "$FANSTORE" stat "$S/data" val/v10.txt
grep -q "Stored: .*(deflate)" "$S/out" && ok || bad "stat shows val/v10.txt deflated: $(cat "$S/out")"
# auto keeps members over 8 MiB raw (a mapped compressed member is inflated whole by every
# process that maps it), with a CRC32C per 1 MiB block (15 blocks: 60 bytes and an 8-byte
# trailer), unless their name says text; an explicit level deflates them all, streamed, in
# 1 MiB blocks.
expect_rc 0 "stat" -- "$FANSTORE" stat "$S/data" big.dat
grep -q "Stored: 14888964 (raw-blocks)" "$S/out" && ok || bad "stat shows big.dat raw under auto: $(cat "$S/out")"
expect_rc 0 "stat" -- "$FANSTORE" stat "$S/data" big.txt
grep -q "Stored: .*(deflate-blocks)" "$S/out" && ok || bad "stat shows big.txt block-deflated under auto: $(cat "$S/out")"
"$FANSTORE" cat "$S/data" big.txt | cmp -s - "$S/src/big.txt" && ok || bad "cat of big.txt deflated under auto"
expect_rc 0 "pack -c 1" -- "$FANSTORE" pack -q -c 1 "$S/src" "$S/level1"
expect_rc 0 "stat" -- "$FANSTORE" stat "$S/level1" big.txt
grep -q "Stored: .*(deflate-blocks)" "$S/out" && ok || bad "stat shows big.txt block-deflated with -c 1: $(cat "$S/out")"
"$FANSTORE" cat "$S/level1" big.txt | cmp -s - "$S/src/big.txt" && ok || bad "cat of big.txt deflated with -c 1"
expect_rc 0 "verify of the -c 1 dataset" -- "$FANSTORE" verify "$S/level1"
expect_rc 1 "ls of a non-dataset" -- "$FANSTORE" ls "$S/src"
expect_err_line "fanstore: $S/src: not a packed dataset (no manifest; \`fanstore pack SRC OUT\` makes one)" "non-dataset error says so"

# Damage: verify names the damaged member and exits 1; a missing partition is named.
cp -r "$S/data" "$S/damaged"
member=$("$FANSTORE" stat "$S/damaged" big.bin | awk '/Offset/ {print $2}')
part=$("$FANSTORE" stat "$S/damaged" big.bin | awk '/Partition/ {print $2}')
# (the byte there is random: it is replaced by its complement, so the write always changes it)
at=$((member + 1000))
byte=$(od -An -tu1 -j "$at" -N1 "$S/damaged/$part" | tr -d ' ')
printf "\\$(printf '%03o' $((255 - byte)))" | dd of="$S/damaged/$part" bs=1 seek="$at" conv=notrunc status=none
cmp -s "$S/data/$part" "$S/damaged/$part" && bad "the damage step changed no byte" || ok
expect_rc 1 "verify of a damaged partition" -- "$FANSTORE" verify -q "$S/damaged"
grep -q "$part: member 'big.bin': checksum mismatch" "$S/err" && ok || bad "verify names the member: $(cat "$S/err")"
expect_rc 1 "cat of a damaged member" -- "$FANSTORE" cat "$S/damaged" big.bin
grep -q "checksum mismatch" "$S/err" && ok || bad "cat reports the damage"
[ ! -s "$S/out" ] && ok || bad "cat of a damaged member wrote $(stat -c %s "$S/out") bytes before failing"
rm "$S/damaged/part-00001.fsb"
expect_rc 1 "verify with a missing partition" -- "$FANSTORE" verify -q "$S/damaged"
grep -q "part-00001.fsb: No such file or directory" "$S/err" && ok || bad "missing partition named"

# Unreadable file: as root, run as nobody so the permission bits apply.
mkdir -p "$S/unreadable/d" && echo secret >"$S/unreadable/d/secret" && chmod 000 "$S/unreadable/d/secret"
chmod 755 "$S" && chmod 777 "$S"
if [ "$(id -u)" -eq 0 ]; then
  expect_rc 1 "unreadable file" -- setpriv --reuid=65534 --regid=65534 --clear-groups "$FANSTORE" pack "$S/unreadable" "$S/unreadable.out"
else
  expect_rc 1 "unreadable file" -- "$FANSTORE" pack "$S/unreadable" "$S/unreadable.out"
fi
expect_err_line "$S/unreadable/d/secret: Permission denied" "unreadable file named"
[ ! -e "$S/unreadable.out" ] && ok || bad "no output left after a failed pack"
ls "$S" | grep -q partial && bad "partial output left behind" || ok

# A full disk (a 20 KiB tmpfs): one line naming the file and the reason, nothing left.
mkdir -p "$S/full"
if mount -t tmpfs -o size=20k tmpfs "$S/full" 2>/dev/null; then
  expect_rc 1 "pack onto a full disk" -- "$FANSTORE" pack -q "$S/src" "$S/full/out"
  # (the source tree's fifo adds its "skipped" warning; the error is the one other line:
  # the 12 MB member refused before it is written, or a small one's ENOSPC)
  grep -v 'fifo: skipped' "$S/err" >"$S/err.rest"
  [ "$(wc -l <"$S/err.rest")" -eq 1 ] &&
    grep -Eq "^fanstore: pack: ($S/src/big.bin: 12000000 bytes, more than the [0-9]+ bytes free where OUT is written|$S/full/out.fanstore-partial-[0-9]+/part-00000.fsb: No space left on device)\$" "$S/err.rest" &&
    ok || bad "full disk: stderr was: $(cat "$S/err")"
  [ -z "$(ls -A "$S/full")" ] && ok || bad "pack onto a full disk left: $(ls -A "$S/full")"
  umount "$S/full"
else
  skip "pack onto a full disk: mounting a small tmpfs failed (not root, or no mount permission)"
fi

# A member's path in the three ways a user types it: relative, with a leading '/', and as
# it was when packed (the manifest's source).
for spelled in val/v3.txt /val/v3.txt "$S/src/val/v3.txt"; do
  "$FANSTORE" cat "$S/data" "$spelled" | cmp -s - "$S/src/val/v3.txt" && ok || bad "cat of '$spelled'"
  "$FANSTORE" stat "$S/data" "$spelled" | grep -q "Path: val/v3.txt" && ok || bad "stat of '$spelled'"
done
[ "$("$FANSTORE" ls "$S/data" "$S/src/val" | wc -l)" -eq 10 ] && ok || bad "ls of the pack-time path of a directory"
"$FANSTORE" cat --help | grep -q "absolute path it had when packed" && ok || bad "cat --help says how paths are spelled"

# --partitions never makes a partition without a non-empty file, and says so.
mkdir -p "$S/few/d" && head -c 100000 /dev/urandom >"$S/few/d/big" && : >"$S/few/a" && : >"$S/few/b"
expect_rc 0 "pack of three files into 4 partitions" -- "$FANSTORE" pack --partitions 4 "$S/few" "$S/fewp"
expect_err_line "fanstore: pack: --partitions 4: the data fills only 1" "the capped --partitions is said"
grep -q "into 1 partition:" "$S/out" && ok || bad "capped partitions: $(cat "$S/out")"

# ls shows a name's control bytes as '?' on a terminal (as coreutils' ls does), and the
# bytes as they are elsewhere.
script -qc "'$FANSTORE' ls '$S/data'" /dev/null | tr -d '\r' >"$S/tty.out"
grep -qx 'new?line' "$S/tty.out" && ok || bad "ls on a terminal: $(grep -a line "$S/tty.out")"
"$FANSTORE" ls "$S/data" | grep -c '^new$' | grep -qx 1 && ok || bad "ls into a pipe keeps the bytes"

# verify builds the namespace too.
expect_rc 0 "verify" -- "$FANSTORE" verify "$S/data"
grep -q "^ok      namespace: " "$S/out" && ok || bad "verify reports the namespace: $(cat "$S/out")"

finish
