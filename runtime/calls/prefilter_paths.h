// The prefilter's fd and path predicates: whether an fd is virtual or a native directory
// known not to be a skeleton one, whether (dirfd, path) could name something under the
// mount point, whether a stat-family path is plainly native, and the entry of a clean
// absolute path by one probe of the image. Part of runtime/calls/prefilter.cc's translation unit
// (it alone includes this), so they are inlined there and compiled with its options.
// Thread-safety: any thread, signal handlers included: what they read of PrefilterState is
// set at start or written by single plain stores (the per-fd bytes, the remembered slots).
#pragma once
#ifndef FANSTORE_PREFILTER_TU
#error "only runtime/calls/prefilter.cc includes this (-mgeneral-regs-only, no calls out)"
#endif

#include <fcntl.h>
#include <sys/syscall.h>

#include "base/syscall_numbers.h"
#include "runtime/names/fast_key.h"
#include "runtime/names/word_scan.h"
#include "runtime/paths/skeleton.h"
#include "runtime/process/fd_table.h"
#include "runtime/process/prefilter_state.h"

namespace fanstore::runtime {
namespace {

// fds are ints to the kernel: only the register's low half counts.
FANSTORE_HOT_TEXT bool VirtualFd(long fd_arg) {
  const int fd = static_cast<int>(fd_arg);
  return fd >= 0 && fd < kMaxFds &&
         (g_prefilter.fd_bits[fd / 64].load(std::memory_order_relaxed) >> (fd % 64) & 1);
}
FANSTORE_HOT_TEXT bool Reserved(long fd) {
  return g_prefilter.reserved_lo > 0 && static_cast<int>(fd) >= g_prefilter.reserved_lo;
}

// Whether absolute path s starts "/proc/" or "/dev/".
FANSTORE_HOT_TEXT bool UnderProcOrDev(const char* s) {
  return s[0] == '/' &&
         ((s[1] == 'p' && s[2] == 'r' && s[3] == 'o' && s[4] == 'c' && s[5] == '/') ||
          (s[1] == 'd' && s[2] == 'e' && s[3] == 'v' && s[4] == '/'));
}

// Could (dirfd, path) name something under the mount point?
// "/proc/..." or "/dev/..." while a virtual fd is open: maybe a link to it (/proc/self/fd/N,
// /dev/fd/N, /dev/stdin, ...; runtime/paths/resolve.h FdLink), which the kernel would follow to
// its placeholder. (The count, in the fd table's pages, is read last.)
FANSTORE_HOT_TEXT bool MaybeFdLink(const char* s) {
  return UnderProcOrDev(s) && g_prefilter.fd_count->load(std::memory_order_relaxed) != 0;
}

// Whether s may start with spelling k (false when there is none), by its first bytes
// (PrefilterState::heads). Stops at s's NUL.
FANSTORE_HOT_TEXT bool HeadMatches(const char* s, int k) {
  const unsigned n = g_prefilter.head_lens[k];
  for (unsigned i = 0; i < n; ++i)
    if (s[i] != g_prefilter.heads[k][i]) return false;
  return n > 0;
}

// `s` past its leading "./" components ("././/x" -> "x").
FANSTORE_HOT_TEXT const char* SkipDotSlashes(const char* s) {
  while (s[0] == '.' && s[1] == '/') {
    s += 2;
    while (*s == '/') ++s;
  }
  return s;
}

// Whether s[0, n) is one of the components of a spelling of the mount point.
FANSTORE_HOT_TEXT bool IsMountName(const char* s, unsigned n) {
  return n > 0 && MayBeMountName(s, n) && IsComponentOfAny(g_prefilter.spellings, kSpellings, s, n);
}

// A relative path from a native directory fd whose first component ("./" skipped) is one
// of the mount point's names (any spelling): it may lead down into the dataset from a
// directory above it (find and du walk by directory fds; runtime/paths/resolve.cc asks the
// kernel where the fd is).
FANSTORE_HOT_TEXT bool MayLeadDown(const char* s) {
  s = SkipDotSlashes(s);
  unsigned n = 0;
  while (s[n] != 0 && s[n] != '/') ++n;
  return IsMountName(s, n);
}

// A relative path whose first component ("./" skipped) is "..": from a native cwd beside
// the mount point, it may lead up and into the dataset ("../data/imagenet/...").
FANSTORE_HOT_TEXT bool LeadsUp(const char* s) {
  s = SkipDotSlashes(s);
  return s[0] == '.' && s[1] == '.' && (s[2] == '/' || s[2] == 0);
}

bool DotDotThenName(const char* s);
bool IsProc(long p);
FANSTORE_HOT_TEXT bool MaybeOurs(long dirfd, long p) {
  const char* s = reinterpret_cast<const char*>(p);
  if (!s) return false;
  if (s[0] == '/') {
    for (int k = 0; k < kSpellings; ++k)
      if (HeadMatches(s, k) &&
          UnderPrefix(s, g_prefilter.spellings[k].path, g_prefilter.spellings[k].len))
        return true;
    return MaybeFdLink(s) || DotDotThenName(s) ||
           (IsProc(p) && g_prefilter.cwd_virtual.load(std::memory_order_relaxed) == 1);
  }
  if (static_cast<int>(dirfd) == AT_FDCWD) {
    const int c = g_prefilter.cwd_virtual.load(std::memory_order_relaxed);
    return c == 1 || (c == 2 && (LeadsUp(s) || DotDotThenName(s)));
  }
  return VirtualFd(dirfd) || MayLeadDown(s) || DotDotThenName(s);
}

// "/proc/..." (readlink of /proc/self/fd/N names a virtual fd's member).
FANSTORE_HOT_TEXT bool IsProc(long p) {
  const char* s = reinterpret_cast<const char*>(p);
  return s && s[0] == '/' && s[1] == 'p' && s[2] == 'r' && s[3] == 'o' && s[4] == 'c' &&
         s[5] == '/';
}

FANSTORE_HOT_TEXT bool NativeDir(long fd) {
  return fd >= 0 && fd < kMaxFds &&
         g_prefilter.native_dirs[fd].load(std::memory_order_relaxed) != 0;
}

// Whether s is one name ("x": no '/', not empty, "." or ".."), of *n bytes.
FANSTORE_HOT_TEXT bool OneName(const char* s, unsigned* n_out) {
  unsigned n = 0;
  while (s[n] != 0) {
    if (s[n] == '/') return false;
    ++n;
  }
  *n_out = n;
  return n != 0 && !(s[0] == '.' && (n == 1 || (n == 2 && s[1] == '.')));
}

// Whether s is one name other than the last name of a spelling of the mount point.
FANSTORE_HOT_TEXT bool OneOtherName(const char* s) {
  unsigned n;
  if (!OneName(s, &n)) return false;
  if (!MayBeMountName(s, n)) return true;
  for (const auto& m : g_prefilter.spellings) {  // the last name of each spelling
    if (m.len == 0) continue;
    unsigned b = m.len;
    while (b > 0 && m.path[b - 1] != '/') --b;
    if (m.len - b == n && EqualBytes(m.path + b, s, n)) return false;
  }
  return true;
}

// Whether openat(a[0], a[1], a[2]) cannot have opened a skeleton directory, by what the
// process knows: one name below a native directory known not to be one, no final link
// followed.
FANSTORE_HOT_TEXT bool ChildOfNativeDir(long nr, const long a[6]) {
  return nr == SYS_openat && (a[2] & O_NOFOLLOW) && NativeDir(a[0]) &&
         OneOtherName(reinterpret_cast<const char*>(a[1]));
}

// Whether the kernel's answer to a covered call other than open cannot come from the
// skeleton: an empty path (the fd itself, or ENOENT), or one name below a native directory
// known not to be the skeleton's (an ENOENT there is that directory's, and the stat family
// needs no permission on the name itself). `du` and `find` stat every name so.
FANSTORE_HOT_TEXT bool KernelsAlone(long nr, int at, const long a[6]) {
  const char* s = reinterpret_cast<const char*>(a[at]);
  if (nr == SYS_open || nr == SYS_openat || !s) return false;
  return s[0] == 0 || (at == 1 && NativeDir(a[0]) && OneOtherName(s));
}

// Whether path s is below a spelling learned from the kernel (runtime/paths/skeleton.h
// LearnedPath; the spelling itself may be the link, the kernel's to answer).
FANSTORE_HOT_TEXT bool UnderLearned(const char* s) {
  if (g_prefilter.learned_count.load(std::memory_order_acquire) == 0 || !s || s[0] != '/')
    return false;
  for (const auto& l : g_prefilter.learned) {
    if (!l.Published()) continue;
    unsigned i = 0;
    while (i < l.key_len && s[i] == l.key[i]) ++i;
    if (i == l.key_len && s[i] == '/') return true;
  }
  return false;
}

// "/repo/code/../data/imagenet/x" (runtime/paths/dot_dot.cc ThroughDotDot).
FANSTORE_HOT_TEXT bool DotDotThenName(const char* s) {
  return runtime::DotDotThenName(g_prefilter.spellings, kSpellings, s);
}

// The entry of an absolute, clean path under the mount point (no ".", "..", "//" or
// trailing '/'), by one probe; false for anything else (the hook resolves it).
FANSTORE_HOT_TEXT bool FastEntry(const char* p, bool follow, uint32_t* out) {
  const size_t total = WordStrlen(p);
  unsigned n = 0;
  for (int k = 0; k < kSpellings; ++k) {  // (the first is always set)
    if (!HeadMatches(p, k)) continue;
    const auto& spelling = g_prefilter.spellings[k];
    if (total >= spelling.len && total <= spelling.len + 4096 &&
        EqualBytes(p, spelling.path, spelling.len)) {
      // an alias's symlink itself, not followed, is the kernel's (the hook sends it there);
      // below an alias of an inner directory the rest is not a key of the table
      if ((spelling.link && total == spelling.len && !follow) || spelling.inside) return false;
      n = spelling.len;
      break;
    }
  }
  if (n == 0) return false;
  size_t i = n;
  if (n > 1) {
    if (total == n) {
      *out = 0;
      return true;
    }
    if (p[n] != '/') return false;
    ++i;
  }
  return FastKeyEntry(g_prefilter.image, p + i, total - i, follow, out);
}

// Whether absolute directory parent[0, n) is in PrefilterState::native_parents (the second
// stage puts it there: prefilter_again.cc ParentInSkeleton).
FANSTORE_HOT_TEXT bool KnownNativeDirSpelling(const char* parent, size_t n) {
  uint64_t key;
  return NativeParentSlot(parent, n, &key).load(std::memory_order_relaxed) == key;
}
// Whether the parent of absolute path s (of len bytes) is.
FANSTORE_HOT_TEXT bool KnownNativeParentOfLength(const char* s, size_t len) {
  size_t n;
  LastComponent c;
  return ParentSpanOfLength(s, len, &n, &c) && KnownNativeDirSpelling(s, n);
}
FANSTORE_HOT_TEXT bool KnownNativeParent(const char* s) {
  return KnownNativeParentOfLength(s, WordStrlen(s));
}

// One name, none of the mount point's, below a directory fd known native and not virtual:
// it cannot lead into the dataset, nor (not followed if a link) be a skeleton directory.
FANSTORE_HOT_TEXT bool NameBelowNativeDir(long dirfd, const char* p) {
  unsigned n;
  return NativeDir(dirfd) && OneName(p, &n) && !IsMountName(p, n) && !VirtualFd(dirfd);
}

// Whether a stat-family call on (dirfd, p) goes to the kernel, decided with one scan of p
// before anything else is asked: an absolute path that starts like no spelling of the mount
// point, has no "." or ".." component, is not under /proc or /dev (fd links), while no
// spelling was learned, whose parent was found native before; one name, none of the mount
// point's, below a directory fd known native; or the empty path of an fd that is not
// virtual (fstat; dirfd AT_FDCWD for stat and lstat, where a relative path is the cwd's).
// For these Classify, UnderLearned, KernelsAlone and prefilter.cc's known-parent rule give
// the same answer, after three to four scans of p: PATH lookups, Python's imports, find's
// and du's stat of every name and fstat of every directory.
FANSTORE_HOT_TEXT bool PlainNativeStat(long dirfd, const char* p) {
  if (p[0] == '/') {
    if (g_prefilter.learned_count.load(std::memory_order_relaxed) != 0) return false;
    for (int k = 0; k < kSpellings; ++k)
      if (HeadMatches(p, k)) return false;
    if (UnderProcOrDev(p)) return false;
    size_t len, slash;
    if (!WordStrlenNoDotName(p, &len, &slash) || len >= 4096) return false;
    if (slash == len - 1) return KnownNativeParentOfLength(p, len);  // (a trailing '/')
    // The parent is p[0, slash), or "/": ParentSpan's spelling, without its scan back.
    return KnownNativeDirSpelling(p, slash == 0 ? 1 : slash);
  }
  if (static_cast<int>(dirfd) == AT_FDCWD) return false;
  if (p[0] == 0) return !VirtualFd(dirfd);
  return NameBelowNativeDir(dirfd, p);
}

// The entry of virtual fd `fd`, if it is one.
FANSTORE_HOT_TEXT bool FdEntry(long fd_arg, uint32_t* out) {
  const int fd = static_cast<int>(fd_arg);
  if (fd < 0 || fd >= kMaxFds) return false;
  const int d = g_prefilter.fd_map[fd].load(std::memory_order_acquire) - 1;
  if (d < 0) return false;
  *out = g_prefilter.descs[d].entry;
  return true;
}

}  // namespace
}  // namespace fanstore::runtime
