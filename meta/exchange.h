// The namespace as exchanged between nodes: each node encodes the index entries of the
// partitions it is primary for, one block per partition; MPI_Allgatherv concatenates every
// node's blocks, and every node builds its namespace image straight from the concatenation
// (BuildNamespaceImageInto), in any block order.
//
// Block (little-endian): a 24-byte header {u32 partition, u32 member count, u64 string bytes
// (paths plus symlink targets), u64 record bytes}, then the records. A record, coded
// against the previous record of its block (the first against zeros):
//   u8 head       kind (bits 0-1), codec (bits 2-3), bit 4: mode as before, bit 5: uid and
//                 gid as before, bit 6: stored size == size; bit 7 zero
//   varint        bytes of the path shared with the previous path (front coding)
//   varint, bytes the rest of the path
//   [varint mode] [varint uid, varint gid] varint size [varint stored size]
//   varint        zigzag(data offset - previous data offset)
//   varint        zigzag(mtime_ns - previous mtime_ns)
//   u32           crc32c
//   bytes         a symlink's target (size bytes)
// Measured: 19-25 bytes per member (ImageNet-like paths), against 98 for the partition
// index's fixed 64-byte records plus whole paths (docs/design.md, "Formats": the exchange).
// Decoding checks every length, varint, kind and count: a short or damaged block is an
// error naming the block and the byte, not a crash.
// Thread-safety: pure functions over caller-owned buffers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "meta/format.h"
#include "meta/partition_reader.h"

namespace fanstore::meta {

// One member to encode; path and target point into a caller-owned buffer.
struct NsMember {
  std::string_view path;
  std::string_view target;  // symlinks only
  IndexRecord rec;          // path_offset and path_length are not used
};

inline constexpr size_t kBlockHeaderSize = 24;

// Appends one block (partition `partition`) to a string, a member at a time.
class BlockEncoder {
 public:
  BlockEncoder(uint32_t partition, std::string* out);
  void Add(const NsMember& m);
  // Writes the header's counts. Nothing may be added after.
  void Finish();

 private:
  std::string* out_;
  size_t header_at_;
  uint32_t count_ = 0;
  uint64_t string_bytes_ = 0;
  std::string prev_path_;
  IndexRecord prev_{};
};

// Appends the block of every member of `reader` (partition `id`) to `out`.
void EncodeMembers(const PartitionReader& reader, uint32_t id, std::string* out);

// One block of an exchange, its header checked against the bytes that hold it.
struct ExchangeBlock {
  uint32_t partition = 0;
  uint32_t count = 0;
  uint64_t string_bytes = 0;
  std::string_view records;
  uint64_t at = 0;  // the header's byte offset in the exchange (for messages)
};

// Splits a concatenation of blocks; `partitions` bounds the partition ids. Blocks come
// back ordered by partition id (stable), so the image does not depend on arrival order.
Result<std::vector<ExchangeBlock>> SplitBlocks(std::string_view bytes, uint32_t partitions);

// Decodes one block's records in order, writing its paths and targets to
// dst[0, block.string_bytes) (a member's target right after its path).
class BlockDecoder {
 public:
  BlockDecoder(const ExchangeBlock& block, char* dst) : b_(block), dst_(dst) {}
  // The next member: its record (path_offset = the path's position in dst, path_length
  // set); false at the end of the block or on damage (then status() says where).
  bool Next(IndexRecord* rec);
  const Status& status() const { return status_; }

 private:
  bool Fail(const std::string& what);

  ExchangeBlock b_;
  char* dst_;
  size_t pos_ = 0;    // in b_.records
  uint64_t out_ = 0;  // bytes written to dst_
  uint32_t decoded_ = 0;
  uint64_t prev_path_ = 0;  // position of the previous path in dst_
  uint32_t prev_len_ = 0;
  IndexRecord prev_{};
  Status status_;
};

}  // namespace fanstore::meta
