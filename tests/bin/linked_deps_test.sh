#!/usr/bin/env bash
# The build's programs, runtime library and MPI plugins need no shared object but glibc's own
# and ISA-L's (cmake/static_deps.cmake links the rest in, so that a cold start maps fewer
# files): each FILE's NEEDED entries, as readelf lists them.
# Usage: linked_deps_test.sh SOURCE_DIR FILE...
SRCDIR=$1
shift
. "$SRCDIR/tests/bin/lib.sh"
if ! command -v readelf >/dev/null; then
  echo "SKIP: no readelf here (binutils) to list what the files need"
  exit 77
fi
[ $# -gt 0 ] || bad "no file to check"
for f in "$@"; do
  name=$(basename "$f")
  needed=$(needed_libs "$f")
  if [ -z "$needed" ]; then
    bad "$name: readelf lists no needed library (not a dynamic ELF file?)"
    continue
  fi
  for lib in $needed; do
    if is_glibc "$lib" || [ "$lib" = libisal.so.2 ]; then ok
    else bad "$name needs $lib, which cmake/static_deps.cmake links in"; fi
  done
done
finish
