// The namespace as exchanged between nodes: each node encodes the index entries of the
// partitions it is primary for, MPI_Allgatherv concatenates every node's block, and every
// node decodes the concatenation and builds its namespace image from it (BuildNamespaceImage).
// Wire record, repeated: IndexRecord (64 bytes, little-endian, as in a blob, except that
// path_offset carries the partition id), the path bytes, then a symlink's target bytes.
// Decoding checks every length and kind: a short or damaged block is an error, not a crash.
// Thread-safety: pure functions over caller-owned buffers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "meta/format.h"
#include "meta/partition_reader.h"
#include "meta/status.h"

namespace fanstore::meta {

// One member of the namespace; path and target point into a caller-owned buffer.
struct NsMember {
  std::string_view path;
  std::string_view target;  // symlinks only
  IndexRecord rec;
  uint32_t partition = 0;
};

// Appends every member of `reader` (partition `id`) to `out`.
void EncodeMembers(const PartitionReader& reader, uint32_t id, std::string* out);
// Decodes a concatenation of encoded members. `partitions` bounds the partition ids.
Result<std::vector<NsMember>> DecodeMembers(std::string_view bytes, uint32_t partitions);
// The members of an opened partition, pointing into the reader.
void AppendMembers(const PartitionReader& reader, uint32_t id, std::vector<NsMember>* out);

}  // namespace fanstore::meta
