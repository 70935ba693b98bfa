// The partition blob's on-disk records (docs/format.md is the byte-level spec).
// Each record is a fixed-size struct whose layout is pinned by static_asserts; EncodeTo and
// DecodeFrom write/read every field explicitly little-endian at its pinned offset, so the
// bytes do not depend on the host. Decode functions check magic, version and checksum only;
// the partition reader checks how records relate to each other and to the file.
// Thread-safety: pure functions and plain values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "base/status.h"

namespace fanstore::meta {

// Version 4 adds raw members with a checksum per block (Codec::kRawBlocks, meta/blocks.h);
// version 3 adds block-deflated members (Codec::kDeflateBlocks); version 2 packs raw members
// under kBlockAlign bytes tight; version 1 aligned every raw member, so a 3-byte file took
// 4 KiB. All four are read.
inline constexpr uint32_t kFormatVersion = 4;
inline constexpr uint32_t kMinFormatVersion = 1;
inline constexpr uint64_t kBlockAlign = 4096;
// A raw member of at least a block starts on a block boundary, so that it can be mapped
// straight from the blob; smaller ones (mapped through a memfd copy) are packed tight.
inline constexpr bool AlignedRaw(uint64_t size) {
  return size >= kBlockAlign;
}
// Member paths are at most this long: namespace images and the start-up exchange keep a
// path's length in 16 bits. The scanner refuses a longer one, naming it; so does the reader.
inline constexpr uint64_t kMaxPathBytes = 65535;
inline constexpr uint64_t kDataStart = 4096;  // header block; member data starts here
inline constexpr std::string_view kPartitionMagic = "FANSTPRT";
inline constexpr std::string_view kFooterMagic = "FANSTFTR";

enum class Kind : uint8_t { kFile = 1, kDir = 2, kSymlink = 3 };
// kDeflate: one raw deflate stream; kDeflateBlocks: independent streams of 1 MiB blocks
// with a table (meta/blocks.h), for members over kStreamThreshold; kRawBlocks: the bytes as
// they are, followed by a CRC32C per 1 MiB block (meta/blocks.h), for raw members over
// kStreamThreshold, so that a read of part of one checks only the blocks it touches.
enum class Codec : uint8_t { kRaw = 0, kDeflate = 1, kDeflateBlocks = 2, kRawBlocks = 3 };
inline constexpr uint8_t kMaxCodec = static_cast<uint8_t>(Codec::kRawBlocks);
// Whether a member's `size` bytes are stored as they are at its data_offset (and a mapping
// of the blob is a mapping of the member).
inline constexpr bool StoredRaw(Codec c) {
  return c == Codec::kRaw || c == Codec::kRawBlocks;
}
inline constexpr bool StoredRaw(uint8_t c) {
  return StoredRaw(static_cast<Codec>(c));
}
inline constexpr uint32_t kFlagBroadcast = 1u << 0;
// At most this many sharded partitions (--partitions), plus one broadcast partition.
inline constexpr uint32_t kMaxShardedPartitions = 65536;
inline constexpr uint32_t kMaxPartitions = kMaxShardedPartitions + 1;

const char* KindName(Kind k);
const char* CodecName(Codec c);

// At offset 0; the rest of the first 4 KiB is zero.
struct PartitionHeader {
  char magic[8];
  uint32_t version;
  uint32_t flags;  // kFlagBroadcast
  uint32_t partition_id;
  uint32_t partition_count;  // of the whole dataset
  uint64_t dataset_id;       // same in every partition and the manifest of one pack
  uint64_t member_count;
  uint64_t data_end;  // end of the member data region (== footer.index_offset)
  uint64_t reserved0;
  uint32_t reserved1;
  uint32_t header_crc;  // CRC32C of bytes [0, 60)

  static constexpr size_t kSize = 64;
  void EncodeTo(uint8_t* out) const;
  static Status DecodeFrom(const uint8_t* in, PartitionHeader* out);
};

// One per member, in path order, starting at footer.index_offset.
struct IndexRecord {
  uint64_t data_offset;  // in the blob; 0 for members without data
  uint64_t size;         // st_size: file bytes, symlink target length, directory st_size
  uint64_t stored_size;  // bytes at data_offset (== size for raw files, 0 without data)
  int64_t mtime_ns;      // since the epoch
  uint64_t path_offset;  // into the string table; a symlink's target follows its path
  uint32_t path_length;  // relative path without leading '/'; "" is the root
  uint32_t mode;         // st_mode, type bits included
  uint32_t uid;
  uint32_t gid;
  uint32_t crc32c;    // of the uncompressed bytes (file data or symlink target)
  uint8_t kind;       // Kind
  uint8_t codec;      // Codec
  uint16_t reserved;  // zero

  static constexpr size_t kSize = 64;
  void EncodeTo(uint8_t* out) const;
  static IndexRecord DecodeFrom(const uint8_t* in);
};

// The last 64 bytes of the blob.
struct PartitionFooter {
  char magic[8];
  uint32_t version;
  uint32_t partition_id;
  uint64_t index_offset;  // 8-aligned, == header.data_end
  uint64_t member_count;
  uint64_t strings_offset;  // == index_offset + member_count * IndexRecord::kSize
  uint64_t strings_size;    // footer starts at strings_offset + strings_size
  uint64_t dataset_id;
  uint32_t index_crc;   // CRC32C of the index records and the string table
  uint32_t footer_crc;  // CRC32C of bytes [0, 60)

  static constexpr size_t kSize = 64;
  void EncodeTo(uint8_t* out) const;
  static Status DecodeFrom(const uint8_t* in, PartitionFooter* out);
};

static_assert(sizeof(PartitionHeader) == PartitionHeader::kSize);
static_assert(offsetof(PartitionHeader, version) == 8);
static_assert(offsetof(PartitionHeader, flags) == 12);
static_assert(offsetof(PartitionHeader, partition_id) == 16);
static_assert(offsetof(PartitionHeader, partition_count) == 20);
static_assert(offsetof(PartitionHeader, dataset_id) == 24);
static_assert(offsetof(PartitionHeader, member_count) == 32);
static_assert(offsetof(PartitionHeader, data_end) == 40);
static_assert(offsetof(PartitionHeader, header_crc) == 60);

static_assert(sizeof(IndexRecord) == IndexRecord::kSize);
static_assert(offsetof(IndexRecord, size) == 8);
static_assert(offsetof(IndexRecord, stored_size) == 16);
static_assert(offsetof(IndexRecord, mtime_ns) == 24);
static_assert(offsetof(IndexRecord, path_offset) == 32);
static_assert(offsetof(IndexRecord, path_length) == 40);
static_assert(offsetof(IndexRecord, mode) == 44);
static_assert(offsetof(IndexRecord, uid) == 48);
static_assert(offsetof(IndexRecord, gid) == 52);
static_assert(offsetof(IndexRecord, crc32c) == 56);
static_assert(offsetof(IndexRecord, kind) == 60);
static_assert(offsetof(IndexRecord, codec) == 61);
static_assert(offsetof(IndexRecord, reserved) == 62);

static_assert(sizeof(PartitionFooter) == PartitionFooter::kSize);
static_assert(offsetof(PartitionFooter, version) == 8);
static_assert(offsetof(PartitionFooter, partition_id) == 12);
static_assert(offsetof(PartitionFooter, index_offset) == 16);
static_assert(offsetof(PartitionFooter, member_count) == 24);
static_assert(offsetof(PartitionFooter, strings_offset) == 32);
static_assert(offsetof(PartitionFooter, strings_size) == 40);
static_assert(offsetof(PartitionFooter, dataset_id) == 48);
static_assert(offsetof(PartitionFooter, index_crc) == 56);
static_assert(offsetof(PartitionFooter, footer_crc) == 60);

// "part-00042.fsb"
std::string PartitionFileName(uint32_t id);

}  // namespace fanstore::meta
