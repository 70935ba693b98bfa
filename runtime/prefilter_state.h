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
