// Dataset: a packed dataset opened for reading by the tools: the manifest, every partition
// (checked against the manifest), and a namespace over all members (a tsl::robin_map keyed
// by path, with directories' children listed in path order). Directories that several
// partitions carry are merged; a file in two partitions is corruption.
// Thread-safety: immutable after Open; const methods are safe from any thread.
#pragma once

#include <tsl/robin_map.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "meta/manifest.h"
#include "meta/partition_reader.h"

namespace fanstore::meta {

struct MemberRef {
  uint32_t partition;
  uint32_t index;
};

class Dataset {
 public:
  // Opens `dir`; any damage to metadata (manifest, headers, footers, indexes) or a missing
  // partition fails with a message naming the file. Member data is checked when read.
  static Result<std::unique_ptr<Dataset>> Open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const Manifest& manifest() const { return manifest_; }
  const std::vector<PartitionReader>& partitions() const { return parts_; }

  // Path relative to the dataset root ("" or "/" is the root; leading '/' is ignored).
  const MemberRef* Lookup(std::string_view path) const;
  MemberView View(const MemberRef& r) const { return parts_[r.partition].member(r.index); }
  // Resolves `path` following symlinks inside the dataset (relative targets, and absolute
  // ones under the manifest's source path), at most 40 hops. `follow_last` = false keeps a
  // final symlink (lstat semantics). Returns nullptr for a missing member, a loop, or a
  // link that leaves the dataset.
  const MemberRef* Resolve(std::string_view path, bool follow_last) const;
  // Children of a directory, in path order (empty for non-directories).
  const std::vector<MemberRef>& Children(std::string_view dir_path) const;
  Status ReadMember(const MemberRef& r,
                    const std::function<bool(std::span<const uint8_t>)>& sink) const {
    return parts_[r.partition].ReadMember(r.index, sink);
  }

 private:
  std::string dir_;
  Manifest manifest_;
  std::vector<PartitionReader> parts_;
  tsl::robin_map<std::string_view, MemberRef> by_path_;
  tsl::robin_map<std::string_view, std::vector<MemberRef>> children_;
};

// Checks an opened partition against the manifest's entry for partition `id`.
Status CheckAgainstManifest(const PartitionReader& p, const Manifest& m, uint32_t id);

}  // namespace fanstore::meta
