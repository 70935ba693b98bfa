// What `fanstore pack` reads from its SOURCE arguments, before any byte is read: archive
// names (their suffixes), brace ranges, and how consecutive sources are cut into groups
// that threads read in parallel. Pure functions of the names, sizes and options.
// Thread-safety: none needed (no state).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "meta/pack.h"

namespace fanstore::meta::archive_pack {

// `name` without its archive suffix (.tar, .tar.gz, .tgz, .tar.zst, .tzst, .tar.xz, .txz,
// .zip), or `name` itself.
std::string StripArchiveSuffix(const std::string& name);
// Whether `name` ends in a tar suffix (compressed or not).
bool HasTarSuffix(const std::string& name);

// Expands the first "{A..B}" of `p` (numbers; the width of A kept when it has leading
// zeros), recursively for the rest, appending to `out`; a pattern with no numeric range is
// appended as it is. A range that is empty or over 10 M names is an error.
Status ExpandBraces(const std::string& p, std::vector<std::string>& out);

// A run of consecutive sources read by one thread into partitions of its own: `cap`
// partitions at most, a new one begun when the current one holds `target` bytes.
struct Group {
  std::vector<std::string> sources;
  uint64_t bytes = 0;  // estimated
  uint32_t cap = 1;
  uint64_t target = 0;
};

// Cuts the sources into groups read in parallel (the output depends on the sources and
// options only, never on the thread count):
//  - with --broadcast, one group (the broadcast partition is one, written in order);
//  - with --partitions N, min(N, sources) runs of about equal estimated bytes (a source
//    goes to the run holding its midpoint), the N partitions shared out among them in
//    proportion to their bytes, at least one each;
//  - else runs of at least 256 MiB, each cut into partitions of 256 MiB.
// `sizes[i]` is source i's estimate: its file size (a directory's: 0).
std::vector<Group> MakeGroups(const std::vector<std::string>& sources,
                              const std::vector<uint64_t>& sizes, const PackOptions& o);

}  // namespace fanstore::meta::archive_pack
