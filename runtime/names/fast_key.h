// One lookup of a path in the namespace image by its key, without the walk: the
// prefilter's (prefilter.cc FastEntry, which answers stat itself) and the hook's path
// resolution's (resolve.cc FastLookup) are this one. It may be compiled into the prefilter
// (no library call, no vector register), so it is header-only with internal linkage.
// Thread-safety: reads the mapped image only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "meta/format.h"
#include "meta/namespace_image.h"
#include "meta/path_hash.h"
#include "runtime/names/word_scan.h"

namespace fanstore::runtime {

// The namespace image's tables (meta::NamespaceView's), as plain pointers.
struct ImageTables {
  const meta::ImageEntry* entries = nullptr;
  const meta::ImageBucket* buckets = nullptr;
  uint64_t bucket_mask = 0;
  const char* strings = nullptr;
};

// The entry of rest[0, len), a path relative to the dataset's root (len 0: the root), when
// one probe finds what the walk would: rest is a key as it is (CleanRelative: no empty
// component, none starting with '.'), the entry is not a symlink to follow, and everyone
// may search every directory on its way (kEntryPathOpen). False: the walk decides.
static inline bool FastKeyEntry(const ImageTables& t, const char* rest, size_t len, bool follow,
                                uint32_t* out) {
  if (len == 0) {
    *out = 0;
    return true;
  }
  if (!CleanRelative(rest, len)) return false;
  const uint32_t e = meta::ProbeBuckets(t.buckets, t.bucket_mask, meta::HashPath(rest, len), len,
                                        [&](const meta::ImageBucket& k) {
                                          // (the entry's line is loaded with the path's, not after
                                          // it: see ImageBucket)
                                          __builtin_prefetch(&t.entries[k.entry_plus_one - 1]);
                                          return EqualBytes(t.strings + k.path_off, rest, len);
                                        });
  if (e == meta::kNoEntry) return false;
  const meta::ImageEntry& entry = t.entries[e];
  if (follow && entry.kind == static_cast<uint8_t>(meta::Kind::kSymlink)) return false;
  if (!(entry.flags & meta::kEntryPathOpen)) return false;  // (the walk checks permissions)
  *out = e;
  return true;
}

}  // namespace fanstore::runtime
