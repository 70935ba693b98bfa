// Manifest: the small text file that names a packed dataset's partitions and totals.
// Line-oriented "key value" text (docs/format.md), first line "fanstore-manifest 1", last
// line "end <crc32c of everything before it>", so a person can read it and damage is caught.
// Thread-safety: plain value.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "meta/partition_writer.h"

namespace fanstore::meta {

inline constexpr const char* kManifestName = "manifest";

struct Manifest {
  uint64_t dataset_id = 0;
  std::string source;    // absolute path of the packed tree: the default mount point
  std::string compress;  // the --compress mode used
  uint64_t files = 0, dirs = 0, symlinks = 0;
  uint64_t bytes = 0;   // uncompressed file bytes
  uint64_t stored = 0;  // stored file bytes
  std::vector<PartitionSummary> partitions;

  std::string Encode() const;
  static Result<Manifest> Decode(const std::string& text);
  static Result<Manifest> Load(const std::string& dataset_dir);
};

// Percent-escapes bytes that would break the line format (controls, space, '%', >= 0x7f).
std::string EscapeField(std::string_view s);
Result<std::string> UnescapeField(std::string_view s);

}  // namespace fanstore::meta
