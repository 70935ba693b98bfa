// The node's mapped copies: a large member held elsewhere that a process maps (mmap) is
// written once per node from its pieces to `<node cache dir>/mapped-<entry>`, and every
// process of the node maps that file (runtime/data/member_io.cc, SharedCopyOf). Together they
// are kept within the node cache's size: before a new copy is made, the copies used least
// recently (by their mtime, which each mapping of an existing copy renews) are removed
// until the new one fits. A copy a process still maps keeps its pages until it is unmapped
// (the file's name goes, not the mapping); a member larger than the whole bound is still
// copied, alone.
// Thread-safety: any thread of any process of the node; processes coordinate through the
// file system only (a copy is published by rename, and removing a name is always safe).
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string_view>
#include <vector>

namespace fanstore::io {

inline constexpr std::string_view kMappedCopyPrefix = "mapped-";

// A finished copy's name is the prefix and the entry's digits only (one being written has a
// suffix: ".<tid>.tmp").
inline bool IsMappedCopyName(std::string_view name) {
  if (name.size() <= kMappedCopyPrefix.size() ||
      name.substr(0, kMappedCopyPrefix.size()) != kMappedCopyPrefix)
    return false;
  return std::all_of(name.begin() + kMappedCopyPrefix.size(), name.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

struct MappedCopy {
  uint64_t bytes = 0;
  int64_t used_ns = 0;  // last made or mapped
};

// Which of `copies` to remove (indexes, least recently used first) so that `need` more
// bytes fit within `bound`: as few as that takes, and all of them when even that is not
// enough.
inline std::vector<size_t> CopiesToRemove(const std::vector<MappedCopy>& copies, uint64_t need,
                                          uint64_t bound) {
  uint64_t total = 0;
  for (const MappedCopy& c : copies) total += c.bytes;
  std::vector<size_t> order(copies.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return copies[a].used_ns < copies[b].used_ns; });
  size_t k = 0;
  for (; k < order.size() && total + need > bound; ++k) total -= copies[order[k]].bytes;
  order.resize(k);
  return order;
}

}  // namespace fanstore::io
