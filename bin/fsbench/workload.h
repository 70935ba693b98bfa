// Workload: the file (and directory) list fsbench runs over, and the order of each epoch.
// Thread-safety: immutable after construction; EpochOrder is a pure function.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "bin/fsbench/options.h"

namespace fanstore::fsbench {

// Paths back to back in one buffer, each NUL-terminated. The timed loop then touches one
// cache line per path (its bytes), where a vector of strings adds the string object and its
// separate allocation: in a stat loop over a tree larger than the last-level cache those
// were a dependent memory miss per call, fsbench's own cost counted against the target.
class PathList {
 public:
  void push_back(std::string_view p) {
    offsets_.push_back(bytes_.size());
    bytes_.append(p);
    bytes_.push_back('\0');
  }
  const char* operator[](size_t i) const { return bytes_.data() + offsets_[i]; }
  size_t size() const { return offsets_.size(); }
  bool empty() const { return offsets_.empty(); }

 private:
  std::string bytes_;
  std::vector<uint64_t> offsets_;
};

struct Workload {
  PathList files;                 // absolute paths
  std::vector<uint64_t> sizes;    // st_size of each file at listing time
  std::vector<std::string> dirs;  // absolute paths, for --op readdir
  uint64_t total_bytes = 0;
};

// Walks `root` (not following symlinks; regular files only), untimed.
Result<Workload> WalkTree(const std::string& root);
// Reads a list of paths (one per line; relative ones are under `root`) and stats them.
Result<Workload> LoadList(const std::string& root, const std::string& list_file);

// The order in which epoch `epoch` visits `n` items: 0..n-1 for sequential, otherwise a
// permutation drawn from (seed, epoch) with Fisher-Yates. Every rank computes the same
// order; ShareOf keeps rank r's share (positions r, r + nranks, ...).
std::vector<uint32_t> EpochOrder(size_t n, Pattern pattern, uint64_t seed, uint64_t epoch);
std::vector<uint32_t> ShareOf(const std::vector<uint32_t>& order, int rank, int nranks);

}  // namespace fanstore::fsbench
