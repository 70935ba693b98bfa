// Word-at-a-time string scans for the prefilter (runtime/calls/prefilter.cc), which looks at the
// path of every system call: byte loops over a 90-byte path cost ~150 ns there. Reads go
// by aligned 8-byte words, which never cross a page, so reading the whole word that holds
// a string's NUL cannot fault (glibc's strlen does the same); the sanitizers are told so.
// No vector code, no library calls: the prefilter is compiled with -mgeneral-regs-only.
// Thread-safety: pure functions of their arguments, callable from any thread and from a
// signal handler.
// Every function has internal linkage (static): each translation unit keeps its own copy,
// compiled with its own flags, so a copy compiled elsewhere with vector code can never be
// the one the prefilter calls (a template without `static` is a weak definition the linker
// may take from any object: tests/intercept/prefilter_object_test.sh refuses those). The
// two templates are always inlined, so that they run from the caller's section (the
// prefilter's hot one): gcc ignores a section attribute on a function template.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fanstore::runtime {

inline constexpr uint64_t kOnes = 0x0101010101010101ull, kHighs = 0x8080808080808080ull;

// (An aligned word may reach past the string's NUL, within its page: not a fault, and the
// sanitizers are told so here too, where the callers' attribute does not reach when this
// is not inlined.)
__attribute__((no_sanitize("address", "thread"))) static inline uint64_t Load8(const char* p) {
  uint64_t w;
  __builtin_memcpy(&w, p, 8);
  return w;
}

// The high bit of every byte of `w` equal to `c`, exactly (no false positives).
static inline uint64_t BytesEqual(uint64_t w, uint8_t c) {
  const uint64_t t = w ^ (kOnes * c);
  return ~(((t & ~kHighs) + ~kHighs) | t) & kHighs;
}

// The high bit of the first zero byte of `w`, and maybe of bytes above it (a borrow): only
// the lowest counts.
static inline uint64_t FirstZeroAndAbove(uint64_t w) {
  return (w - kOnes) & ~w & kHighs;
}

// strlen, a word at a time.
__attribute__((no_sanitize("address", "thread"))) static inline size_t WordStrlen(const char* p) {
  const uintptr_t start = reinterpret_cast<uintptr_t>(p);
  uintptr_t at = start & ~uintptr_t{7};
  uint64_t w = Load8(reinterpret_cast<const char*>(at));
  if (const unsigned skip = static_cast<unsigned>(start - at)) w |= ~0ull >> (64 - 8 * skip);
  for (;;) {
    if (const uint64_t z = FirstZeroAndAbove(w))
      return at + (static_cast<unsigned>(__builtin_ctzll(z)) >> 3) - start;
    at += 8;
    w = Load8(reinterpret_cast<const char*>(at));
  }
}

// The aligned word holding s[0], its address in *at, with the bytes before s reading as
// '/' (not a NUL, and s[0] starts a component).
__attribute__((no_sanitize("address", "thread"))) static inline uint64_t FirstWordAfterSlash(
    const char* s, uintptr_t* at) {
  const uintptr_t start = reinterpret_cast<uintptr_t>(s);
  *at = start & ~uintptr_t{7};
  uint64_t w = Load8(reinterpret_cast<const char*>(*at));
  if (const unsigned skip = static_cast<unsigned>(start - *at)) {
    const uint64_t before = ~0ull >> (64 - 8 * skip);
    w = (w & ~before) | (kOnes * '/' & before);
  }
  return w;
}

// Just past the first ".." component of path `s` (at a '/' or the NUL), nullptr if it has
// none. A '.' that starts a component and is followed by a '.' is checked byte by byte
// (".cache" never is; "..x" and "..." are, and are names).
__attribute__((no_sanitize("address", "thread"))) static inline const char* FindDotDot(
    const char* s) {
  uintptr_t at;
  uint64_t w = FirstWordAfterSlash(s, &at);
  uint64_t carry = 0x80;  // the byte before the word is a '/'
  for (;;) {
    const uint64_t zero = FirstZeroAndAbove(w);
    const uint64_t slash = BytesEqual(w, '/'), dot = BytesEqual(w, '.');
    // a '.' after a '/' and before a '.' (the word's last byte: maybe, its next is unseen)
    uint64_t cand = ((slash << 8) | carry) & dot & ((dot >> 8) | (0x80ull << 56));
    if (zero) cand &= (zero & (~zero + 1)) - 1;  // the bytes before the NUL
    for (; cand; cand &= cand - 1) {
      const char* d = reinterpret_cast<const char*>(at) + (__builtin_ctzll(cand) >> 3);
      if (d[1] == '.' && (d[2] == '/' || d[2] == 0)) return d + 2;
    }
    if (zero) return nullptr;
    carry = slash >> 56;
    at += 8;
    w = Load8(reinterpret_cast<const char*>(at));
  }
}

// strlen of absolute path `s` into *len and the index of its last '/' into *last_slash, a
// word at a time, and whether no component of it starts with '.' (so none is "." or ".."):
// false as soon as one does (*len and *last_slash then unset).
__attribute__((no_sanitize("address", "thread"))) static inline bool WordStrlenNoDotName(
    const char* s, size_t* len, size_t* last_slash) {
  const uintptr_t start = reinterpret_cast<uintptr_t>(s);
  uintptr_t at;
  uint64_t w = FirstWordAfterSlash(s, &at);
  uintptr_t slash_at = start;  // (s[0] is a '/', above the ones read before it)
  uint64_t carry = 0x80;       // the byte before the word is a '/'
  for (;;) {
    const uint64_t zero = FirstZeroAndAbove(w);
    uint64_t slash = BytesEqual(w, '/');
    uint64_t dot_name = ((slash << 8) | carry) & BytesEqual(w, '.');
    if (zero) {
      const uint64_t before_nul = (zero & (~zero + 1)) - 1;
      dot_name &= before_nul;
      slash &= before_nul;
    }
    if (dot_name) return false;
    if (slash) slash_at = at + (static_cast<unsigned>(63 - __builtin_clzll(slash)) >> 3);
    if (zero) {
      *len = at + (static_cast<unsigned>(__builtin_ctzll(zero)) >> 3) - start;
      *last_slash = slash_at - start;
      return true;
    }
    carry = slash >> 56;
    at += 8;
    w = Load8(reinterpret_cast<const char*>(at));
  }
}

// Whether s[0, n) is one of the components of one of spellings[0, count) (each with `path`
// and `len`; len 0: none). Byte by byte: no library calls.
template <class Spelling>
__attribute__((always_inline)) static inline bool IsComponentOfAny(const Spelling* spellings,
                                                                   int count, const char* s,
                                                                   unsigned n) {
  if (n == 0) return false;
  for (int k = 0; k < count; ++k) {
    const char* m = spellings[k].path;
    const unsigned len = spellings[k].len;
    for (unsigned i = 0; i < len;) {
      while (i < len && m[i] == '/') ++i;
      unsigned j = i;
      while (j < len && m[j] != '/') ++j;
      if (j - i == n) {
        unsigned c = 0;
        while (c < n && m[i + c] == s[c]) ++c;
        if (c == n) return true;
      }
      i = j;
    }
  }
  return false;
}

// Whether path s has a ".." component followed by a component of one of the spellings
// ("/repo/code/../data/imagenet/x"). The same test as runtime/names/mount_ways.h
// DotDotBeforeName, on a C string with no library calls, for the prefilter (the two are
// checked against each other in tests/runtime/word_scan_test.cc). The search for the ".."
// goes a word at a time; only a path with one is walked by components.
template <class Spelling>
__attribute__((always_inline)) static inline bool DotDotThenName(const Spelling* spellings,
                                                                 int count, const char* s) {
  const char* c = FindDotDot(s);
  if (!c) return false;
  for (;;) {
    while (*c == '/') ++c;
    if (*c == 0) return false;
    unsigned n = 0;
    while (c[n] != 0 && c[n] != '/') ++n;
    if (IsComponentOfAny(spellings, count, c, n)) return true;
    c += n;
  }
}

// a[0, n) == b[0, n), both readable over that range.
static inline bool EqualBytes(const char* a, const char* b, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    if (Load8(a + i) != Load8(b + i)) return false;
  if (i == n) return true;
  if (n >= 8) return Load8(a + n - 8) == Load8(b + n - 8);  // the tail, overlapping
  for (; i < n; ++i)
    if (a[i] != b[i]) return false;
  return true;
}

// A relative path the table can hold as it is: no empty component ("//", a leading or
// trailing '/') and no component starting with '.' ("." and ".." need the walk; names such
// as ".hidden" take it too, which is only slower).
static inline bool CleanRelative(const char* r, size_t len) {
  if (r[0] == '/' || r[0] == '.' || r[len - 1] == '/') return false;
  uint64_t carry = 0;  // 0x80 when the byte before the current word is '/'
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    const uint64_t w = Load8(r + i);
    const uint64_t slash = BytesEqual(w, '/');
    const uint64_t after_slash = (slash << 8) | carry;
    if (after_slash & (slash | BytesEqual(w, '.'))) return false;
    carry = slash >> 56;
  }
  bool prev_slash = carry != 0;
  for (; i < len; ++i) {
    if (prev_slash && (r[i] == '/' || r[i] == '.')) return false;
    prev_slash = r[i] == '/';
  }
  return true;
}

}  // namespace fanstore::runtime
