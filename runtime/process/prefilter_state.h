// What the runtime's prefilter (prefilter.cc, compiled with -mgeneral-regs-only) reads:
// plain globals only, set at start-up and updated with single stores.
// Thread-safety: written by Init and the cwd/fd-table updates; read lock-free.
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <cstdint>

#include "intercept/hook_api.h"
#include "meta/namespace_image.h"
#include "meta/path_hash.h"
#include "runtime/names/fast_key.h"
#include "runtime/names/path_pair.h"
#include "runtime/process/counter.h"
#include "runtime/process/fd_table.h"

namespace fanstore::runtime {

// Spellings of the mount point, at most this many (PrefilterState::spellings).
inline constexpr int kSpellings = 6;

// Spellings learned from the kernel's answers (runtime/paths/skeleton.h), at most this many.
inline constexpr int kLearned = 8;

// Native parent directories of ENOENTs remembered (prefilter_again.cc ParentInSkeleton).
inline constexpr int kNativeParents = 256;

// The fields every intercepted call may read come first, in a few cache lines of one page,
// and the bulky arrays after them: each page the prefilter touches costs a TLB miss after
// every system call on some virtual machines (docs/design.md, "Interception": a prefilter before
// the vector save).
struct PrefilterState {
  bool active = false;
  // The process may read fanrun's skeleton directories (mode 0111: root, or a holder of
  // CAP_DAC_OVERRIDE or CAP_DAC_READ_SEARCH), so a directory it opens may be one of them
  // and must be checked; otherwise such an open fails with EACCES, which says so.
  bool skeleton_readable = true;
  bool skeleton_marked = false;  // the mount point's native directory carries skeleton.h's mark
  int physical = 0;              // the spelling the kernel gives (/proc/self/fd links, getcwd)
  uint64_t skeleton_dev = 0;     // st_dev of the mount point's native directory (0: none)
  int reserved_lo = 0;
  std::atomic<int> cwd_virtual{1};  // 1: relative paths may be ours; 2: those starting with ".."
  std::atomic<int> learned_count{0};
  const std::atomic<uint64_t>* fd_bits = nullptr;  // FdTable::bits(), kMaxFds bits
  const std::atomic<int>* fd_count = nullptr;      // FdTable::bound()
  const std::atomic<int32_t>* fd_map = nullptr;    // FdTable::fd_map(): description + 1
  const OpenFile* descs = nullptr;                 // FdTable::slab()
  // No fd below this is free in the kernel, as far as the runtime knows: an open takes a
  // parked fd only below it, so its number is the lowest free one, as POSIX says (handlers_open.cc
  // OpenVirtual). Lowered by every close the prefilter sees, raised by a placeholder's dup.
  std::atomic<int> low_hole{0};
  // A test before any spelling's text is read (the text lies pages away): bit n of
  // name_lengths is set when a component of some spelling is n bytes long (63: 63 or more),
  // and bit c of name_firsts when one starts with byte c. A name failing either is none of
  // the mount point's names (MayBeMountName). Set with the spellings, at start.
  uint64_t name_lengths = 0;
  uint64_t name_firsts[4] = {};
  // Each spelling's first bytes (at most 8) and their count (0: no such spelling), side by
  // side in one cache line: a path elsewhere is told apart by them alone (HeadMatches),
  // without the spellings' own lines or their text, pages away.
  alignas(64) char heads[kSpellings][8] = {};
  uint8_t head_lens[kSpellings] = {};
  // The namespace image, for stat answered in the prefilter.
  ImageTables image;
  // The mount point as given, its symlinks resolved, and symlinks to it (State::spellings;
  // hook.cc checks that the two counts agree). `path` points into spelling_text.
  struct Spelling {
    const char* path = "";
    unsigned len = 0;     // 0: none
    bool link = false;    // an alias whose last component is the symlink (State::alias_links)
    bool inside = false;  // an alias of a directory inside the dataset: keys are not relative to it
  } spellings[kSpellings];
  ShardedCounter answered_stats;  // stat calls answered in the prefilter
  // Hashes of absolute directories found not to be the skeleton's (prefilter_again.cc
  // ParentInSkeleton; looked up by both stages), before native_dirs so that the fds most
  // programs have stay near them.
  std::atomic<uint64_t> native_parents[kNativeParents] = {};
  // Native directory fds known not to be skeleton directories (a byte per fd below
  // kMaxFds, 1: known): a name below one, opened without following a final link, cannot be
  // one either, unless it is the mount point's own name. Set where the prefilter sees the
  // fd made and checked; cleared by close, dup2/dup3 onto it, close_range, and any open
  // that returns the number. Bytes, not bits: each is set and cleared by a plain store,
  // where a bit shared with 63 other fds needs a locked read-modify-write (~10 ns here) on
  // every directory open, dup and close of a walk. Only the pages of the fds a process
  // uses are ever touched.
  std::atomic<uint8_t> native_dirs[kMaxFds] = {};
  // A directory spelled as the key (through a symlink the runtime was not told of) that is
  // physically the value, at or under the mount point (runtime/paths/skeleton.h).
  PathPair<1024, 1024> learned[kLearned];
  char spelling_text[kSpellings][4096] = {};
};
extern PrefilterState g_prefilter;

// Whether absolute path s is mount point m (n bytes) or below it. Byte by byte: reading
// ahead in words could run past the application's NUL.
inline bool UnderPrefix(const char* s, const char* m, unsigned n) {
  unsigned i = 0;
  for (; i < n; ++i)
    if (s[i] != m[i]) return false;
  return s[i] == '/' || s[i] == 0 || n == 1;
}

// Marks fd as a native directory known not to be the skeleton's, or clears the mark.
// (This and NoteFdFreed are always inlined: the prefilter's first stage calls them, and gcc
// would otherwise split them into clones in .text, outside its hot section.)
__attribute__((always_inline)) inline void SetNativeDir(long fd, bool on) {
  if (fd < 0 || fd >= kMaxFds) return;
  std::atomic<uint8_t>& b = g_prefilter.native_dirs[fd];
  if (on || b.load(std::memory_order_relaxed)) b.store(on ? 1 : 0, std::memory_order_relaxed);
}

// fd was closed: no longer is every fd below low_hole taken.
__attribute__((always_inline)) inline void NoteFdFreed(long fd_arg) {
  const int fd = static_cast<int>(fd_arg);
  int was = g_prefilter.low_hole.load(std::memory_order_relaxed);
  while (fd >= 0 && fd < was &&
         !g_prefilter.low_hole.compare_exchange_weak(was, fd, std::memory_order_relaxed)) {
  }
}

// Adds the components of spelling p[0, len) to PrefilterState's name filter.
inline void AddMountNames(const char* p, unsigned len) {
  for (unsigned i = 0; i < len;) {
    while (i < len && p[i] == '/') ++i;
    unsigned j = i;
    while (j < len && p[j] != '/') ++j;
    if (j > i) {
      const auto c = static_cast<unsigned char>(p[i]);
      g_prefilter.name_lengths |= uint64_t{1} << (j - i < 63 ? j - i : 63);
      g_prefilter.name_firsts[c / 64] |= uint64_t{1} << (c % 64);
    }
    i = j;
  }
}

// Whether s[0, n) (n > 0) may be a component of a spelling of the mount point: false
// means it is none (true may still be none: compare the text).
__attribute__((always_inline)) inline bool MayBeMountName(const char* s, unsigned n) {
  const auto c = static_cast<unsigned char>(s[0]);
  return (g_prefilter.name_lengths >> (n < 63 ? n : 63) & 1) &&
         (g_prefilter.name_firsts[c / 64] >> (c % 64) & 1);
}

// The slot of PrefilterState::native_parents for absolute directory parent[0, n), and its
// key there (never 0, which marks an empty slot).
inline std::atomic<uint64_t>& NativeParentSlot(const char* parent, size_t n, uint64_t* key) {
  *key = meta::HashPath(parent, n) | 1;
  return g_prefilter.native_parents[*key % kNativeParents];
}

intercept::PrefilterResult RuntimePrefilter(long nr, const long a[6]) noexcept;
// Its second stage (intercept/call_abi.h kAgain), after it made a path call with result `k`:
// whether the answer came from the skeleton (then the hook serves the call again).
intercept::PrefilterResult RuntimePrefilterAgain(long nr, const long a[6], long k) noexcept;

// stat and statx contents of entry `idx`, written field by field with general registers
// only (shared by the prefilter's fast path and the handlers).
void FillStatOf(uint32_t idx, struct stat* st) noexcept;
void FillStatxOf(uint32_t idx, void* statx_buf) noexcept;

}  // namespace fanstore::runtime
