#!/usr/bin/env bash
# The build's programs, runtime library and MPI plugins need no shared object but glibc's own
# and ISA-L's (cmake/static_deps.cmake links the rest in, so that a cold start maps fewer
# files): each FILE's NEEDED entries, as readelf lists them.
# Usage: linked_deps_test.sh SOURCE_DIR FILE...
SRCDIR=$1
shift
. "$SRCDIR/tests/bin/lib.sh"
allowed="libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1 ld-linux-x86-64.so.2
  ld-linux-aarch64.so.1 libisal.so.2"
if ! command -v readelf >/dev/null; then
  echo "SKIP: no readelf here (binutils) to list what the files need"
  exit 77
fi
[ $# -gt 0 ] || bad "no file to check"
for f in "$@"; do
  name=$(basename "$f")
  needed=$(readelf -d --wide "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  if [ -z "$needed" ]; then
    bad "$name: readelf lists no needed library (not a dynamic ELF file?)"
    continue
  fi
  for lib in $needed; do
    case " $(echo $allowed) " in
      *" $lib "*) ok ;;
      *) bad "$name needs $lib, which cmake/static_deps.cmake links in" ;;
    esac
  done
done
finish
