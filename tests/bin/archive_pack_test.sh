#!/usr/bin/env bash
# Packing straight from archives: a tree packed from its tar (GNU and PAX), tar.gz,
# tar.zst, tar.xz and zip, from nested class tars and from WebDataset-style shards gives
# the same `fanstore ls -lR` as the archive extracted by tar and packed, and the same bytes
# under fanrun; and each corner case of the formats (long names, sparse members, hard
# links, missing directories, duplicates, absolute paths and "..", truncated and damaged
# archives) is handled as tar x would, or refused with one line naming the archive.
# Archives are made by GNU tar, zip and Python's tarfile.
# Usage: archive_pack_test.sh BINDIR
BIN=$1
FANSTORE=$BIN/fanstore
FANRUN=$BIN/fanrun
. "$(dirname "$0")/lib.sh"
S=$SCRATCH
for t in tar zip zstd xz python3; do
  command -v "$t" >/dev/null || { echo "SKIP: archive packing: '$t' is not installed"; exit 77; }
done

# The tree: nested directories, text (one over 8 MiB, streamed in blocks), random bytes,
# an empty file, a symlink, a hard link, a name over 100 bytes, a space and UTF-8 in names.
T=$S/tree
mkdir -p "$T/train/cat" "$T/train/dog/deep/er" "$T/val" "$T/empty_dir"
for i in 1 2 3 4 5; do
  head -c $((i * 7000)) /dev/urandom >"$T/train/cat/$i.jpg"
  python3 -c "print('dog $i ' * $((i * 500)))" >"$T/train/dog/$i.txt"
done
python3 -c "print('line of text\n' * 900000)" >"$T/train/dog/deep/big.txt"
: >"$T/train/dog/deep/er/empty"
ln -s ../cat/1.jpg "$T/train/dog/link.jpg"
ln "$T/train/cat/2.jpg" "$T/val/hard.jpg"
long=$(printf 'n%.0s' $(seq 1 120))
echo long >"$T/val/$long.txt"
echo spaced >"$T/val/a file é.txt"
chmod 0640 "$T/val/a file é.txt"
touch -d '2001-02-03 04:05:06' "$T/train/cat/1.jpg"

A=$S/archives
mkdir -p "$A"
(cd "$T" && tar -cf "$A/gnu.tar" . && tar --format=posix -cf "$A/pax.tar" . &&
  tar -czf "$A/tree.tgz" . && tar --zstd -cf "$A/tree.tar.zst" . && tar -cJf "$A/tree.tar.xz" . &&
  zip -qry "$A/tree.zip" .)

# listing DATA: `fanstore ls -lR` of a dataset
# (a directory's size is its file system's: 4096 on ext4 for a tree packed from disk, 4096
# for one from an archive; on tmpfs the extracted tree's differ, so they are left out)
listing() { "$FANSTORE" ls -lR "$1" | awk '/^d/ {$4 = "-"} {print}'; }
# bytes_native DIR / bytes_served DATA: every file's checksum and every entry's kind and
# link target, as a program sees them (served: under fanrun at a mount point)
bytes_native() { (cd "$1" && find . -printf '%y %p %l\n' | sort && find . -type f -print0 | sort -z | xargs -0 -r sha256sum); }
bytes_served() {
  local m=$S/mnt-$RANDOM
  "$FANRUN" -d "$1" -m "$m" -- sh -c "cd '$m' && find . -printf '%y %p %l\n' | sort && find . -type f -print0 | sort -z | xargs -0 -r sha256sum"
}
# same_as_extracted NAME DATA REF_DIR: DATA lists and reads as REF_DIR (a tar x) packed
same_as_extracted() {
  local ref=$S/ref-$1
  "$FANSTORE" pack -q "$3" "$ref" 2>/dev/null || { bad "$1: packing the extracted tree failed"; return; }
  listing "$ref" >"$S/l.ref"
  listing "$2" >"$S/l.got"
  expect_same "$S/l.ref" "$S/l.got" "$1: fanstore ls -lR as the extracted tree's"
  bytes_native "$3" >"$S/b.ref"
  bytes_served "$2" >"$S/b.got" 2>"$S/b.err" || bad "$1: fanrun failed: $(head -3 "$S/b.err")"
  expect_same "$S/b.ref" "$S/b.got" "$1: the same entries and bytes under fanrun"
}

# Each tar against itself extracted by tar x; the zip against the GNU tar's extraction
# (zip keeps whole seconds, as that format does).
for a in gnu.tar pax.tar tree.tgz tree.tar.zst tree.tar.xz tree.zip; do
  X=$S/x-$a
  mkdir -p "$X" && tar -C "$X" -xf "$A/${a/tree.zip/gnu.tar}"
  expect_rc 0 "pack $a" -- "$FANSTORE" pack -q --public "$A/$a" "$S/d-$a"
  same_as_extracted "$a" "$S/d-$a" "$X"
  expect_rc 0 "verify $a" -- "$FANSTORE" verify -q "$S/d-$a"
done
# The source: where tar x beside the archive would put the tree.
"$FANSTORE" info "$S/d-tree.tgz" | grep -q "^source *$A/tree$" && ok || bad "source of tree.tgz: $("$FANSTORE" info "$S/d-tree.tgz" | grep source)"

# The same bytes whatever the thread count; a tar and the packer's own temporary names
# leave nothing behind but OUT.
expect_rc 0 "pack with 1 thread" -- "$FANSTORE" pack -q --public -t 1 "$A/tree.tgz" "$S/t1"
expect_rc 0 "pack with 4 threads" -- "$FANSTORE" pack -q --public -t 4 "$A/tree.tgz" "$S/t4"
for f in "$S/t1"/*; do expect_same "$f" "$S/t4/$(basename "$f")" "-t 1 and -t 4: $(basename "$f")"; done
ls -a "$A" | sort >"$S/a.after"
printf '.\n..\ngnu.tar\npax.tar\ntree.tar.xz\ntree.tar.zst\ntree.tgz\ntree.zip\n' >"$S/a.want"
expect_same "$S/a.want" "$S/a.after" "nothing created beside the archives"

# ImageNet's shape: one tar of class tars; --untar-nested makes each class a directory.
N=$S/nested
mkdir -p "$N/classes" "$N/x"
for c in n01 n02 n03; do
  mkdir -p "$N/src/$c"
  for i in 1 2 3; do head -c $((3000 + i)) /dev/urandom >"$N/src/$c/${c}_$i.JPEG"; done
  tar -C "$N/src/$c" -cf "$N/classes/$c.tar" $(cd "$N/src/$c" && ls)
  touch -d "@$(stat -c %Y "$N/classes/$c.tar")" "$N/classes/$c.tar"  # (tar keeps seconds)
  mkdir -p "$N/x/$c" && tar -C "$N/x/$c" -xf "$N/classes/$c.tar"
done
tar -C "$N/classes" -cf "$N/train.tar" n01.tar n02.tar n03.tar
# (the class directories as a user extracting each class tar makes them: the tar's mtime)
for c in n01 n02 n03; do touch -r "$N/classes/$c.tar" "$N/x/$c"; done
expect_rc 0 "pack nested class tars" -- "$FANSTORE" pack -q --public --untar-nested "$N/train.tar" "$S/d-nested"
same_as_extracted nested "$S/d-nested" "$N/x"
"$FANSTORE" ls -l "$S/d-nested" / >"$S/out"
grep -q ' n02$' "$S/out" && ! grep -q 'n02.tar' "$S/out" && ok || bad "nested: n02/ and no n02.tar: $(cat "$S/out")"
expect_rc 0 "pack the outer tar as it is" -- "$FANSTORE" pack -q --public "$N/train.tar" "$S/d-outer"
"$FANSTORE" ls "$S/d-outer" / | grep -q '^n01.tar$' && ok || bad "without --untar-nested the class tars stay files"

# WebDataset-style shards: a brace range (or a glob) merges them into one namespace, or
# --keep-shard-dirs puts each under its own directory.
W=$S/wds
mkdir -p "$W/src" "$W/shards" "$W/x"
for s in 0 1 2; do
  files=()
  for k in 0 1 2 3; do
    key=$(printf '%06d' $((s * 4 + k)))
    head -c $((2000 + k)) /dev/urandom >"$W/src/$key.jpg"
    echo "$k" >"$W/src/$key.cls"
    files+=("$key.jpg" "$key.cls")
  done
  tar -C "$W/src" -cf "$W/shards/train-$(printf '%06d' $s).tar" "${files[@]}"
  tar -C "$W/x" -xf "$W/shards/train-$(printf '%06d' $s).tar"
done
expect_rc 0 "pack shards by brace range" -- "$FANSTORE" pack -q --public "$W/shards/train-{000000..000002}.tar" "$S/d-wds"
same_as_extracted shards "$S/d-wds" "$W/x"
bytes_native "$W/x" >"$S/b.ref"
expect_rc 0 "pack shards by glob" -- "$FANSTORE" pack -q --public "$W/shards/*.tar" "$S/d-wds-glob"
listing "$S/d-wds" >"$S/l.a"
listing "$S/d-wds-glob" >"$S/l.b"
expect_same "$S/l.a" "$S/l.b" "a glob gives what the brace range gives"
expect_rc 0 "pack with --keep-shard-dirs" -- "$FANSTORE" pack -q --public --keep-shard-dirs "$W/shards/*.tar" "$S/d-wds-dirs"
"$FANSTORE" cat "$S/d-wds-dirs" train-000001/000005.cls >"$S/out" 2>&1
[ "$(cat "$S/out")" = 1 ] && ok || bad "--keep-shard-dirs: train-000001/000005.cls: $(cat "$S/out")"
# With --partitions 3 the three shards are read in parallel, each into its own partition:
# the same namespace, and the same bytes with 1 thread or 4.
expect_rc 0 "shards in parallel, -t 1" -- "$FANSTORE" pack -q --public -p 3 -t 1 "$W/shards/*.tar" "$S/d-wds-p1"
expect_rc 0 "shards in parallel, -t 4" -- "$FANSTORE" pack -q --public -p 3 -t 4 "$W/shards/*.tar" "$S/d-wds-p4"
"$FANSTORE" info "$S/d-wds-p4" | grep -q ' in 3 partitions$' && ok || bad "-p 3: three partitions: $("$FANSTORE" info "$S/d-wds-p4" | grep partitions)"
for f in "$S/d-wds-p1"/*; do expect_same "$f" "$S/d-wds-p4/$(basename "$f")" "parallel shards, -t 1 and -t 4: $(basename "$f")"; done
bytes_served "$S/d-wds-p4" >"$S/b.got" 2>/dev/null
expect_same "$S/b.ref" "$S/b.got" "shards read in parallel: the merged namespace"
# Across shards read in parallel: a later shard's member replaces an earlier one's, and a
# hard link may name a file of an earlier shard (as tar x of one after the other).
TAR_OF=$(dirname "$0")/tar_of.py
python3 "$TAR_OF" "$W/x-0.tar" dup.txt=first keep.txt=keep
python3 "$TAR_OF" "$W/x-1.tar" dup.txt=second hard.txt@keep.txt
python3 "$TAR_OF" "$W/y-0.tar" d/f.txt=f
python3 "$TAR_OF" "$W/y-1.tar" "d=not a dir"
expect_rc 0 "two shards in parallel with a duplicate" -- "$FANSTORE" pack -q --public -p 2 "$W/x-0.tar" "$W/x-1.tar" "$S/d-x"
grep -q "x-1.tar: 'dup.txt' appears again; the later one wins" "$S/err" && ok || bad "cross-shard duplicate warned: $(cat "$S/err")"
[ "$("$FANSTORE" cat "$S/d-x" dup.txt)" = second ] && ok || bad "cross-shard duplicate: the later shard wins"
[ "$("$FANSTORE" cat "$S/d-x" hard.txt)" = keep ] && ok || bad "a hard link to an earlier shard's file"
expect_rc 0 "verify parallel shards" -- "$FANSTORE" verify -q "$S/d-x"
expect_rc 1 "a later shard's file over an earlier shard's directory" -- "$FANSTORE" pack -q -p 2 "$W/y-0.tar" "$W/y-1.tar" "$S/d-y"
expect_err_line "replaces a directory of an earlier source that is not empty" "a file over a full directory is refused"
[ ! -e "$S/d-y" ] && ok || bad "refused merge: output left behind"
expect_rc 1 "a glob that matches nothing" -- "$FANSTORE" pack -q "$W/shards/none-*.tar" "$S/d-none"
expect_err_line "none-*.tar: matches no file" "a glob that matches nothing is named"
# --prefix, and an archive mixed with a directory
expect_rc 0 "pack with --prefix and a directory" -- "$FANSTORE" pack -q --public --prefix data/train "$A/tree.tgz" "$W/src" "$S/d-mixed"
"$FANSTORE" cat "$S/d-mixed" data/train/train/dog/1.txt | cmp -s - "$T/train/dog/1.txt" && ok || bad "--prefix: a member of the archive"
"$FANSTORE" cat "$S/d-mixed" data/train/000007.cls | cmp -s - "$W/src/000007.cls" && ok || bad "--prefix: a file of the directory"

# Corner cases, each with an archive made as the wild makes them.
C=$S/corner
mkdir -p "$C/src/a"
# Sparse members (GNU tar --sparse, in the GNU and the PAX formats): expanded.
truncate -s 20M "$C/src/a/sparse.bin"
printf 'middle' | dd of="$C/src/a/sparse.bin" bs=1 seek=$((10 * 1024 * 1024)) conv=notrunc status=none
printf 'end' >>"$C/src/a/sparse.bin"
for f in gnu posix; do
  tar -C "$C/src" --sparse --format=$f -cf "$C/sparse-$f.tar" a/sparse.bin
  expect_rc 0 "pack a sparse member ($f)" -- "$FANSTORE" pack -q --public "$C/sparse-$f.tar" "$C/d-sparse-$f"
  "$FANSTORE" cat "$C/d-sparse-$f" a/sparse.bin | cmp -s - "$C/src/a/sparse.bin" && ok || bad "sparse ($f): the bytes differ from the file's"
done
# GNU and PAX long names and link targets (Python's tarfile).
python3 - "$C" <<'EOF'
import io, sys, tarfile
d = sys.argv[1]
name = "dir/" + "x" * 150 + "/" + "y" * 120 + ".txt"
for fmt, tag in ((tarfile.GNU_FORMAT, "gnu"), (tarfile.PAX_FORMAT, "pax")):
    with tarfile.open(f"{d}/long-{tag}.tar", "w", format=fmt) as t:
        data = b"long name\n"
        ti = tarfile.TarInfo(name); ti.size = len(data); ti.mtime = 1234567890
        t.addfile(ti, io.BytesIO(data))
        li = tarfile.TarInfo("dir/link"); li.type = tarfile.SYMTYPE; li.linkname = "z" * 200
        t.addfile(li)
        h = tarfile.TarInfo("dir/hard"); h.type = tarfile.LNKTYPE; h.linkname = name
        t.addfile(h)
EOF
# Hostile names, one archive each.
python3 "$TAR_OF" "$C/dotdot.tar" ../evil.txt=x
python3 "$TAR_OF" "$C/abs.tar" /etc/evil.txt=x
python3 "$TAR_OF" "$C/dotdot2.tar" a/../../evil=x
# (directories the archive does not list take the archive's mtime: the same for both)
touch -d '2020-02-02 02:02:02' "$C/long-gnu.tar" "$C/long-pax.tar"
for f in gnu pax; do
  expect_rc 0 "pack long names ($f)" -- "$FANSTORE" pack -q --public "$C/long-$f.tar" "$C/d-long-$f"
  "$FANSTORE" cat "$C/d-long-$f" "dir/$(printf 'x%.0s' $(seq 1 150))/$(printf 'y%.0s' $(seq 1 120)).txt" >"$S/out" 2>&1
  [ "$(cat "$S/out")" = "long name" ] && ok || bad "long name ($f): $(cat "$S/out")"
  "$FANSTORE" cat "$C/d-long-$f" dir/hard >"$S/out" 2>&1
  [ "$(cat "$S/out")" = "long name" ] && ok || bad "hard link to a long name ($f): $(cat "$S/out")"
  "$FANSTORE" ls -l "$C/d-long-$f" dir | grep -q "link -> $(printf 'z%.0s' $(seq 1 200))\$" && ok || bad "long link target ($f)"
done
listing "$C/d-long-gnu" >"$S/l.a"
listing "$C/d-long-pax" >"$S/l.b"
expect_same "$S/l.a" "$S/l.b" "GNU and PAX long names give the same namespace"
# A PAX global header is read past; a hard link to nothing and a file where a directory
# is needed are refused with one line.
python3 "$TAR_OF" "$C/global.tar" --pax-global "g/f.txt=global header read past"
python3 "$TAR_OF" "$C/badlink.tar" --pax-global a.txt=a b.txt@nope.txt
python3 "$TAR_OF" "$C/filedir.tar" --pax-global a=a a/b=b
expect_rc 0 "a PAX global header" -- "$FANSTORE" pack -q --public "$C/global.tar" "$C/d-global"
[ "$("$FANSTORE" cat "$C/d-global" g/f.txt)" = "global header read past" ] && ok || bad "PAX global header: member read"
expect_rc 1 "a hard link to nothing" -- "$FANSTORE" pack -q "$C/badlink.tar" "$C/d-badlink"
expect_err_line "'b.txt' (at byte 2048) is a hard link to 'nope.txt', which is not a file before it" "a hard link to nothing is named"
expect_rc 1 "a file where a directory is needed" -- "$FANSTORE" pack -q "$C/filedir.tar" "$C/d-filedir"
expect_err_line "'a' is a file, and a later member needs it to be a directory" "a file where a directory is needed"
# A zip of stored members (zip -0) reads as the deflated one.
(cd "$T" && zip -0 -qry "$C/stored.zip" .)
expect_rc 0 "pack a stored zip" -- "$FANSTORE" pack -q --public "$C/stored.zip" "$C/d-stored"
listing "$C/d-stored" >"$S/l.a"
listing "$S/d-tree.zip" >"$S/l.b"
expect_same "$S/l.a" "$S/l.b" "stored and deflated zips give the same namespace"
# Directories the archive does not list are made.
mkdir -p "$C/src/p/q/r" && echo deep >"$C/src/p/q/r/f.txt"
tar -C "$C/src" --no-recursion -cf "$C/nodirs.tar" p/q/r/f.txt
expect_rc 0 "pack an archive without directory entries" -- "$FANSTORE" pack -q --public "$C/nodirs.tar" "$C/d-nodirs"
"$FANSTORE" ls -l "$C/d-nodirs" p/q >"$S/out"
grep -q '^drwxr-xr-x .* r$' "$S/out" && ok || bad "missing directories made 0755: $(cat "$S/out")"
# Duplicates: the later wins, with a warning (tar r appends a second copy).
echo first >"$C/src/dup.txt" && tar -C "$C/src" -cf "$C/dup.tar" dup.txt
echo second >"$C/src/dup.txt" && tar -C "$C/src" -rf "$C/dup.tar" dup.txt
expect_rc 0 "pack an archive with a duplicate" -- "$FANSTORE" pack -q --public "$C/dup.tar" "$C/d-dup"
grep -q "dup.txt' appears again at byte .*the later one wins" "$S/err" && ok || bad "duplicate warned: $(cat "$S/err")"
[ "$("$FANSTORE" cat "$C/d-dup" dup.txt)" = second ] && ok || bad "duplicate: the later copy wins"
# Refused: absolute paths and "..", with one line and no output.
for tag in abs dotdot dotdot2; do
  expect_rc 1 "$tag refused" -- "$FANSTORE" pack -q "$C/$tag.tar" "$C/d-$tag"
  expect_err_line "$C/$tag.tar: member" "$tag: one line naming the archive"
  [ ! -e "$C/d-$tag" ] && ok || bad "$tag: output left behind"
done
grep -q "absolute path" <("$FANSTORE" pack -q "$C/abs.tar" "$C/d-abs" 2>&1) && ok || bad "absolute path said"
# Truncated and damaged archives: one line naming the archive and a byte offset, nothing
# left behind (not even the hidden partial directory).
for a in gnu.tar tree.tgz tree.zip; do
  head -c $(($(stat -c %s "$A/$a") / 2)) "$A/$a" >"$C/truncated.${a#*.}"
done
# (damage the header of a later member: its offset from tarfile)
off=$(python3 -c "import tarfile,sys; m=tarfile.open(sys.argv[1]).getmembers(); print(m[3].offset)" "$A/gnu.tar")
cp "$A/gnu.tar" "$C/damaged.tar"
printf 'Z' | dd of="$C/damaged.tar" bs=1 seek=$((off + 10)) conv=notrunc status=none
cp "$A/tree.tgz" "$C/damaged.tgz"
size=$(stat -c %s "$C/damaged.tgz")
printf '\x55\xaa\x55\xaa' | dd of="$C/damaged.tgz" bs=1 seek=$((size / 2)) conv=notrunc status=none
for a in truncated.tar truncated.tgz damaged.tar damaged.tgz truncated.zip; do
  expect_rc 1 "$a refused" -- "$FANSTORE" pack -q "$C/$a" "$C/d-$a"
  expect_err_line "$C/$a" "$a: one line naming the archive"
  grep -q "byte [0-9]" "$S/err" && ok || bad "$a: the offset is given: $(cat "$S/err")"
  [ -z "$(ls -A "$C" | grep "d-$a")" ] && ok || bad "$a: output left behind: $(ls -A "$C" | grep "d-$a")"
done
# Read in parallel with a good archive, a damaged one is still the one named.
expect_rc 1 "a damaged shard beside a good one" -- "$FANSTORE" pack -q -p 2 "$A/tree.tar.xz" "$C/truncated.tar" "$C/d-par"
expect_err_line "$C/truncated.tar" "a damaged shard beside a good one is the one named"
echo "just text" >"$C/notes.txt"
expect_rc 1 "a file that is no archive" -- "$FANSTORE" pack -q "$C/notes.txt" "$C/d-notes"
expect_err_line "notes.txt: is not a tar or zip archive" "a file that is no archive is named"
grep -q "damaged header" <("$FANSTORE" pack -q "$C/damaged.tar" "$C/d-x" 2>&1) && ok || bad "damaged.tar: says a damaged header"

# A declared size the archive cannot hold is refused from the header, before any byte is
# written: a plain tar whose member says 8 GiB (its size field rewritten, checksum fixed).
python3 - "$C/huge.tar" <<'PY'
import io, sys, tarfile
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as t:
    info = tarfile.TarInfo("a/huge.bin"); info.size = 4
    t.addfile(info, io.BytesIO(b"abcd"))
b = bytearray(buf.getvalue())
b[124:136] = b"77777777777\0"
b[148:156] = b" " * 8
b[148:156] = b"%06o\0 " % sum(b[0:512])
open(sys.argv[1], "wb").write(bytes(b))
PY
expect_rc 1 "a member larger than its archive" -- "$FANSTORE" pack -q "$C/huge.tar" "$C/d-huge"
expect_err_line "declares 8589934591 bytes of data for 'a/huge.bin', more than the" "a member larger than its plain tar is refused from its header"
[ ! -e "$C/d-huge" ] && ok || bad "huge.tar: output left behind"
# A member larger than the room where OUT is written (a sparse 64 MiB file in a gzipped
# tar, packed onto a 16 MiB tmpfs) is refused before it is written, naming its size.
if [ "$(id -u)" = 0 ] && mkdir -p "$S/small" && mount -t tmpfs -o size=16m tmpfs "$S/small" 2>/dev/null; then
  mkdir -p "$S/sparse/d" && truncate -s 64M "$S/sparse/d/holes.bin"
  tar -C "$S/sparse" --sparse -czf "$C/sparse.tgz" d
  expect_rc 1 "a member larger than OUT's free space" -- "$FANSTORE" pack -q "$C/sparse.tgz" "$S/small/out"
  expect_err_line "d/holes.bin" "the member too large for OUT is named"
  grep -q "67108864 bytes, more than the [0-9]* bytes free where OUT is written" "$S/err" && ok ||
    bad "the refusal says the size and the room: $(cat "$S/err")"
  [ "$(df --output=used -B1 "$S/small" | tail -1)" -lt $((1 << 20)) ] && ok || bad "the refused member filled the disk: $(df "$S/small" | tail -1)"
  umount "$S/small"
else
  skip "a member larger than OUT's free space: needs root to mount a small tmpfs"
fi
finish
