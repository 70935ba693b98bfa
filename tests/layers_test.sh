#!/usr/bin/env bash
# The layers include one way only (docs/design.md, "Layers"): each folder's sources may
# include their own folder and the layers below it, never one above or beside it. A back
# edge fails here, with the line that makes it.
#   base < compress < meta < io, intercept (siblings) < runtime < bin
# (intercept stands on base alone.) Inside runtime/, its five folders follow the same rule
# (names < process < data, paths < calls). Two rules of the same kind ride along: every header has
# a Thread-safety: line, no FANSTORE_ variable is named outside base/env_names.h, and no
# handler under runtime/calls reads an fd or a path by its position (runtime/calls/args.h).
# Usage: layers_test.sh SOURCE_DIR [--quiet]   (--quiet: only failures are printed; the
#   build runs it so, as the layers_check target, so that a back edge fails the build)
set -u
cd "$1" || exit 1
quiet=${2:-}
declare -A allowed=(
  [base]="base"
  [compress]="base compress"
  [meta]="base compress meta"
  [io]="base compress meta io"
  [intercept]="base intercept"
  [runtime]="base compress meta io intercept runtime"
  [bin]="base compress meta io intercept runtime bin"
)
fail=0 n=0
for layer in base compress meta io intercept runtime bin; do
  while IFS= read -r hit; do
    file=${hit%%:*} rest=${hit#*:} line=${rest%%:*}
    [[ $rest =~ include\ \"([^\"]+)\" ]] || continue
    inc=${BASH_REMATCH[1]}
    n=$((n + 1))
    ok=0
    for a in ${allowed[$layer]}; do
      case $a in
        */*) [ "$inc" = "$a" ] && ok=1 ;;
        *) [ "${inc%%/*}" = "$a" ] && ok=1 ;;
      esac
    done
    # (includes of files outside the layers, such as third-party headers, are not ours)
    case ${inc%%/*} in base | compress | meta | io | intercept | runtime | bin) ;; *) ok=1 ;; esac
    if [ $ok = 0 ]; then
      echo "FAIL: $file:$line: $layer includes $inc (allowed: ${allowed[$layer]})"
      fail=1
    fi
  done < <(grep -rnE '^\s*#\s*include "' "$layer" --include='*.cc' --include='*.h' --include='*.S' --include='*.c')
done
[ $n -gt 100 ] || { echo "FAIL: only $n includes found under $1"; exit 1; }
# Inside runtime/ the same rule holds between its folders:
#   names < process < data, paths (siblings) < calls
declare -A inner=(
  [names]="names"
  [process]="names process"
  [data]="names process data"
  [paths]="names process paths"
  [calls]="names process data paths calls"
)
for sub in names process data paths calls; do
  [ -d "runtime/$sub" ] || { echo "FAIL: runtime/$sub is missing"; fail=1; continue; }
  while IFS= read -r hit; do
    file=${hit%%:*} rest=${hit#*:} line=${rest%%:*}
    [[ $rest =~ include\ \"runtime/([^/\"]+)/ ]] || continue
    inc=${BASH_REMATCH[1]}
    n=$((n + 1))
    case " ${inner[$sub]} " in *" $inc "*) ;; *)
      echo "FAIL: $file:$line: runtime/$sub includes runtime/$inc (allowed: ${inner[$sub]})"
      fail=1 ;;
    esac
  done < <(grep -rnE '^\s*#\s*include "runtime/' "runtime/$sub" --include='*.cc' --include='*.h')
done
# Every runtime source is in one of those folders.
for f in runtime/*.h runtime/*.cc; do
  [ -e "$f" ] && { echo "FAIL: $f: outside runtime's folders (names, process, data, paths, calls)"; fail=1; }
done
# Every header says which threads may use what it declares (a "Thread-safety:" line).
for h in $(find base compress meta io intercept runtime bin -name '*.h'); do
  grep -q 'Thread-safety:' "$h" || { echo "FAIL: $h: no Thread-safety: line in its opening comment"; fail=1; }
done
# Every FANSTORE_* variable is named in base/env_names.h and used by its constant there,
# so no layer reads or sets one the header does not list (comments may name them).
while IFS= read -r hit; do
  echo "FAIL: ${hit%%:*}:$(cut -d: -f2 <<<"$hit"): a FANSTORE_ variable named by its text; use base/env_names.h"
  fail=1
done < <(grep -rnE '"FANSTORE_' base compress meta io intercept runtime bin --include='*.cc' --include='*.h' |
  grep -v '^base/env_names.h:' | grep -vE '^[^:]+:[0-9]+:\s*//' || true)
# The handlers read a call's fds and paths through its row (runtime/calls/args.h), never by
# a position of their own.
while IFS= read -r hit; do
  echo "FAIL: ${hit%%:*}:$(cut -d: -f2 <<<"$hit"): an fd or path read by its position; use runtime/calls/args.h"
  fail=1
done < <(grep -rnE 'Lookup\(a\[|Str\(a\[' runtime/calls --include='*.cc' --include='*.h' || true)
[ $fail = 0 ] && [ "$quiet" != --quiet ] && echo "layers: $n includes checked, none goes up or across"
exit $fail
