#!/usr/bin/env bash
# Inside a Debian root (ci/debian-root.sh): installs the build dependencies, builds a plain
# Release build with the system's compiler and default options (no presets, warnings not
# errors), and checks that every file of a small tree read under fanrun is byte-identical
# to the tree. Prints the toolchain's versions and one verdict line.
# Usage: ci/debian-root.sh SUITE /src/ci/root-smoke.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ci/install-deps.sh --no-python
echo "toolchain: $(gcc --version | head -1); $(ld --version | head -1); $(ldd --version | head -1)"
b=/tmp/fanstore-root-build
cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=Release -DFANSTORE_BUILD_TESTS=OFF >/dev/null
cmake --build "$b" -j"$(nproc)" >"$b.log" 2>&1 || { tail -30 "$b.log"; exit 1; }
warnings=$(grep -c 'warning:' "$b.log" || true)
t=/tmp/fanstore-root-smoke
rm -rf "$t" && mkdir -p "$t/src/a/b"
seq 1 50000 >"$t/src/a/n.txt"
head -c 300000 /dev/urandom >"$t/src/a/b/r.bin"
for i in $(seq 1 300); do echo "$i" >"$t/src/a/f$i"; done
ln -s a/n.txt "$t/src/l"
"$b/bin/fanstore" pack -q "$t/src" "$t/ds"
(cd "$t/src" && find . -type f | sort | xargs sha256sum) >"$t/native.sum"
"$b/bin/fanrun" --data "$t/ds" --mount "$t/mnt" -- sh -c "cd '$t/mnt' && find . -type f | sort | xargs sha256sum" >"$t/fanrun.sum"
if cmp -s "$t/native.sum" "$t/fanrun.sum"; then
  echo "root-smoke: ok: $warnings compiler warnings; $(wc -l <"$t/fanrun.sum") files read under fanrun byte-identical"
else
  echo "root-smoke: FAILED: the files read under fanrun differ"; diff "$t/native.sum" "$t/fanrun.sum" | head; exit 1
fi
