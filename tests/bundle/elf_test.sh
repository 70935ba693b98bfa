#!/usr/bin/env bash
# The bundle's ELF files (ci/bundle.sh) need nothing a cluster node may lack: each file's
# needed libraries are glibc's own or ones the bundle carries in lib/; no version reference
# is newer than GLIBC_2.28 (RHEL 8) and none is of libstdc++ or libgcc (GLIBCXX_, CXXABI_,
# GCC_); the tools find lib/ through RUNPATH $ORIGIN/../lib, the libraries through
# $ORIGIN; the runtime library, loaded into applications with their own C++ runtime and
# libraries, exports no symbol at all, and each MPI plugin only its entry point and names
# MPI's symbols without needing an MPI library (the job's is loaded first: bin/mpi_load.h).
# Usage: elf_test.sh SOURCE_DIR [TARBALL]   (default: this architecture's newest
#                                           build/bundle/fanstore-*-linux-ARCH.tar.gz)
SRCDIR=$1
. "$SRCDIR/tests/bin/lib.sh"
tarball=${2:-$(ls -t "$SRCDIR"/build/bundle/fanstore-*-linux-"$(uname -m)".tar.gz 2>/dev/null | head -1)}
if [ -z "$tarball" ] || [ ! -f "$tarball" ]; then
  echo "SKIP: no bundle to check (ci/bundle.sh makes build/bundle/fanstore-*.tar.gz)"
  exit 77
fi
tar -C "$SCRATCH" -xzf "$tarball" || { bad "cannot unpack $tarball"; finish; exit 1; }
B=$(echo "$SCRATCH"/fanstore-*)
# version_gt A B: A (e.g. 2.31) is newer than B.
version_gt() { [ "$1" != "$2" ] && [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | tail -1)" = "$1" ]; }

elves=()
for f in "$B"/bin/* "$B"/lib/*; do
  [ -f "$f" ] && [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = "177ELF" ] && elves+=("$f")
done
for want in bin/fanrun bin/fanstore bin/fsbench lib/libfanstore.so lib/libfanstore_mpi_mpich.so \
  lib/libfanstore_mpi_openmpi.so lib/libisal.so.2; do
  [ -f "$B/$want" ] && ok || bad "the bundle lacks $want"
done

for f in "${elves[@]}"; do
  name=${f#"$B"/}
  dyn=$(readelf -d --wide "$f")
  for lib in $(needed_libs "$f"); do
    if is_glibc "$lib" || [ -f "$B/lib/$lib" ]; then ok
    else bad "$name needs $lib, which is neither glibc's nor carried in lib/"; fi
  done
  # Version references: the newest GLIBC_ one, and any of the C++ runtime's.
  refs=$(readelf -V --wide "$f" | sed -n 's/.*Name: \([A-Z_]*[0-9][0-9.]*\).*/\1/p' | sort -u)
  newest=$(grep '^GLIBC_[0-9]' <<<"$refs" | sed 's/GLIBC_//' | sort -V | tail -1)
  if [ -n "$newest" ] && version_gt "$newest" 2.28; then
    bad "$name refers to GLIBC_$newest: $(readelf --dyn-syms --wide "$f" | grep -oE '[a-z_0-9]+@GLIBC_2\.(29|3[0-9])' | sort -u | head -5 | tr '\n' ' ')"
  else ok; fi
  cxx=$(grep -E '^(GLIBCXX|CXXABI|GCC)_' <<<"$refs" | tr '\n' ' ')
  [ -z "$cxx" ] && ok || bad "$name refers to the C++ runtime's versions: $cxx"
  runpath=$(sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p' <<<"$dyn")
  case $name in
    bin/*) [ "$runpath" = '$ORIGIN/../lib' ] && ok || bad "$name: RUNPATH '$runpath', expected \$ORIGIN/../lib" ;;
    lib/libfanstore*) [ "$runpath" = '$ORIGIN' ] && ok || bad "$name: RUNPATH '$runpath', expected \$ORIGIN" ;;
  esac
  # What the runtime library and the plugins export (defined dynamic symbols, versions aside).
  exported=$(readelf --dyn-syms --wide "$f" | awk '$7 != "UND" && ($5 == "GLOBAL" || $5 == "WEAK") && $4 != "SECTION" {print $8}' | sed 's/@.*//' | sort -u | tr '\n' ' ')
  case $name in
    lib/libfanstore.so)
      [ -z "$exported" ] && ok || bad "$name exports symbols: $(head -c 300 <<<"$exported")" ;;
    lib/libfanstore_mpi_*)
      [ "$exported" = "fanstore_mpi_library " ] && ok || bad "$name exports more than its entry point: $(head -c 300 <<<"$exported")"
      grep -q 'MPI_' <<<"$(readelf --dyn-syms --wide "$f")" && ! grep -q 'libmpi' <<<"$dyn" && ok ||
        bad "$name: MPI's symbols should be named, and no MPI library needed" ;;
  esac
done
echo "checked ${#elves[@]} ELF files of $(basename "$tarball")"
finish
