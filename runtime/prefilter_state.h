// What the runtime's prefilter (prefilter.cc, compiled with -mgeneral-regs-only) reads:
// plain globals only, set at start-up and updated with single stores.
// Thread-safety: written by Init and the cwd/fd-table updates; read lock-free.
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <cstdint>

#include "intercept/hook_api.h"
#include "meta/namespace_image.h"
#include "runtime/counter.h"
#include "runtime/fd_table.h"
#include "runtime/path_pair.h"

namespace fanstore::runtime {

// The mount point as given, its symlinks resolved, and symlinks to it (State::spellings;
// hook.cc checks that the two counts agree).
inline constexpr int kSpellings = 6;

// Spellings learned from the kernel's answers (runtime/skeleton.h), at most this many.
inline constexpr int kLearned = 8;

// Native parent directories of ENOENTs remembered (prefilter.cc ParentInSkeleton).
inline constexpr int kNativeParents = 256;

struct PrefilterState {
  bool active = false;
  struct Spelling {
    char path[4096] = {};
    unsigned len = 0;     // 0: none
    bool link = false;    // an alias whose last component is the symlink (State::alias_links)
    bool inside = false;  // an alias of a directory inside the dataset: keys are not relative to it
  } spellings[kSpellings];
  int physical = 0;              // the spelling the kernel gives (/proc/self/fd links, getcwd)
  uint64_t skeleton_dev = 0;     // st_dev of the mount point's native directory (0: none)
  bool skeleton_marked = false;  // it carries runtime/skeleton.h's mark
  // The process may read fanrun's skeleton directories (mode 0111: root, or a holder of
  // CAP_DAC_OVERRIDE or CAP_DAC_READ_SEARCH), so a directory it opens may be one of them
  // and must be checked; otherwise such an open fails with EACCES, which says so.
  bool skeleton_readable = true;
  // Native directory fds known not to be skeleton directories (one bit per fd below
  // kMaxFds): a name below one, opened without following a final link, cannot be one
  // either, unless it is the mount point's own name. Set where the prefilter sees the fd
  // made and checked; cleared by close, dup2/dup3 onto it, close_range, and any open that
  // returns the number.
  std::atomic<uint64_t> native_dirs[kMaxFds / 64] = {};
  // Hashes of absolute directories found not to be the skeleton's (prefilter.cc
  // ParentInSkeleton).
  std::atomic<uint64_t> native_parents[kNativeParents] = {};
  // A directory spelled as the key (through a symlink the runtime was not told of) that is
  // physically the value, at or under the mount point (runtime/skeleton.h).
  PathPair<1024, 1024> learned[kLearned];
  std::atomic<int> learned_count{0};
  int reserved_lo = 0;
  const std::atomic<uint64_t>* fd_bits = nullptr;  // FdTable::bits(), kMaxFds bits
  const std::atomic<int>* fd_count = nullptr;      // FdTable::bound()
  const std::atomic<int32_t>* fd_map = nullptr;    // FdTable::fd_map()
  const OpenFile* descs = nullptr;                 // FdTable::slab()
  std::atomic<int> cwd_virtual{1};  // 1: relative paths may be ours; 2: those starting with ".."
  ShardedCounter answered_stats;    // stat calls answered in the prefilter
  // The namespace image, for stat answered in the prefilter.
  const meta::ImageEntry* entries = nullptr;
  const meta::ImageBucket* buckets = nullptr;
  uint64_t bucket_mask = 0;
  const char* strings = nullptr;
};
extern PrefilterState g_prefilter;

intercept::PrefilterResult RuntimePrefilter(long nr, const long a[6]) noexcept;

// stat and statx contents of entry `idx`, written field by field with general registers
// only (shared by the prefilter's fast path and the handlers).
void FillStatOf(uint32_t idx, struct stat* st) noexcept;
void FillStatxOf(uint32_t idx, void* statx_buf) noexcept;

}  // namespace fanstore::runtime
