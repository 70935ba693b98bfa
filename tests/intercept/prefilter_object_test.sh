#!/usr/bin/env bash
# The prefilters run before the entry has saved any vector register, so their object code
# must hold no SSE/AVX/AVX-512, MMX or x87 instruction (on aarch64: no SIMD/FP or SVE
# register, and no outline atomic, which is a call), and call nothing outside itself
# (no memcpy/memset a compiler may form from a loop, no std::terminate, no weak definition
# the linker may take from another object). Checked on the
# objects this compiler produced, whatever flags it was given.
# Usage: prefilter_object_test.sh OBJECT...   (the objects of the libraries holding them)
set -u
fail=0 n=0
if [ "$(uname -m)" = aarch64 ]; then
  # (v0.16b, z0.d, p0/z, and q0 d0 s0 h0 b0 ending an operand: not a branch's address)
  vector='[[:space:],{](v[0-9]+\.|z[0-9]+\.|p[0-9]+/|[qdshb][0-9]+(,|\]|\}|$))'
else
  vector='%[xyz]mm[0-9]|%k[0-7]\b|%mm[0-7]|%st\b|%st\(|\bf(ld|st|add|mul|div|sub)'
fi
for o in "$@"; do
  case "$o" in *prefilter.cc.o|*prefilter_again.cc.o) ;; *) continue ;; esac
  n=$((n + 1))
  regs=$(objdump -d --no-show-raw-insn "$o" | grep -E "$vector" | head -3)
  if [ -n "$regs" ]; then echo "FAIL: $o uses vector or x87 registers: $regs"; fail=1; fi
  # Undefined symbols: only the data it reads (the entry's tables, the runtime prefilter's
  # state), the thread's clone mark (initial-exec TLS, constinit: no init function), and
  # the unwinder's personality (data, used only if an exception passed through).
  calls=$(nm -u "$o" | awk '{print $2}' |
    grep -vE '^(_GLOBAL_OFFSET_TABLE_|__gxx_personality_v0)$|t_clone_child|g_entry|g_prefilter' | head -5)
  if [ -n "$calls" ]; then echo "FAIL: $o refers to outside functions: $(echo $calls | c++filt)"; fail=1; fi
  # A weak definition (an inline function or template without `static`) is one the linker
  # may take from any other object, compiled there with vector code.
  weak=$(nm "$o" | awk '$2 == "W" || $2 == "V" {print $3}' | head -5)
  if [ -n "$weak" ]; then echo "FAIL: $o defines weak functions another object may replace: $(echo $weak | c++filt)"; fail=1; fi
  # The first stage runs on every intercepted call: all its code sits in the hot section
  # (FANSTORE_HOT_TEXT), so that a call touches as few code pages as it can (docs/design.md,
  # "What a native call pays"). A helper gcc leaves out of line, or a clone it makes, lands
  # in .text unless it is inlined.
  case "$o" in
    *runtime*/prefilter.cc.o)
      cold=$(objdump -t "$o" | awk '$3 == "F" && $4 !~ /^\.text\.hot/ {print $NF}' | head -5)
      if [ -n "$cold" ]; then echo "FAIL: $o has code outside the hot section: $(echo $cold | c++filt)"; fail=1; fi ;;
  esac
done
[ $n -ge 3 ] || { echo "FAIL: expected the intercept prefilter and the runtime prefilter stages, found $n"; fail=1; }
[ $fail = 0 ] && echo "prefilter objects: $n checked, no vector or x87 code, no outside call, no weak definition"
exit $fail
