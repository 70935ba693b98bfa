// The stored bytes of a block-deflated member (Codec::kDeflateBlocks, format 3;
// docs/format.md): the member's bytes cut into kDeflateBlockBytes blocks, each an
// independent raw deflate stream, then a table with one entry per block and a trailer:
//
//   stream 0, stream 1, ... stream n-1 | n x BlockEntry (16 bytes) | BlockTrailer (8 bytes)
//
// so that a read of part of a large compressed member inflates only the blocks it touches.
// A raw member with block checksums (Codec::kRawBlocks, format 4) stores its bytes as they
// are, then one CRC32C per block and the same trailer:
//
//   the member's size bytes | n x CRC32C (4 bytes) | BlockTrailer (8 bytes)
//
// so that a read of part of a large raw member checks only the blocks it touches.
// The decoders check every field against the member's size and stored size and refuse what
// does not fit (a damaged table gives an error, never a read outside the member).
// Thread-safety: pure functions and plain values; no allocation (the runtime calls them).
#pragma once

#include <cstddef>
#include <cstdint>

namespace fanstore::meta {

// Uncompressed bytes per block (the last one holds the rest). Format 3 fixes it; the
// trailer repeats it, and a reader refuses another value.
inline constexpr uint32_t kDeflateBlockBytes = 1u << 20;
inline constexpr size_t kBlockEntryBytes = 16;
inline constexpr size_t kBlockTrailerBytes = 8;

struct BlockEntry {
  uint64_t offset;  // of the block's stream, from the member's first stored byte
  uint32_t length;  // of the stream
  uint32_t crc32c;  // of the block's uncompressed bytes
};

struct BlockTrailer {
  uint32_t block_bytes;   // kDeflateBlockBytes
  uint32_t count;         // blocks: ceil(size / block_bytes)
  uint64_t table_offset;  // where the table starts, = where the streams end
};

inline uint64_t BlockCount(uint64_t size) {
  return (size + kDeflateBlockBytes - 1) / kDeflateBlockBytes;
}
// Uncompressed bytes of block b of a member of `size` bytes.
inline uint64_t BlockPlainBytes(uint64_t size, uint64_t b) {
  const uint64_t start = b * kDeflateBlockBytes;
  return size - start < kDeflateBlockBytes ? size - start : kDeflateBlockBytes;
}
// Stored bytes the table and trailer take for `count` blocks.
inline uint64_t BlockTableBytes(uint64_t count) {
  return count * kBlockEntryBytes + kBlockTrailerBytes;
}

// Stored bytes of a raw member with block checksums: the member, the checksums, the trailer.
inline constexpr size_t kRawBlockCrcBytes = 4;
inline uint64_t RawBlocksStoredBytes(uint64_t size) {
  return size + BlockCount(size) * kRawBlockCrcBytes + kBlockTrailerBytes;
}
// Where block b's checksum is, from the member's first stored byte.
inline uint64_t RawBlockCrcOffset(uint64_t size, uint64_t b) {
  return size + b * kRawBlockCrcBytes;
}

void EncodeBlockEntry(const BlockEntry& e, uint8_t* out);
void EncodeBlockTrailer(uint32_t count, uint8_t* out);

// `in`: the last kBlockTrailerBytes of the stored bytes. False when the trailer does not
// fit a member of `size` bytes stored in `stored_size`.
bool DecodeBlockTrailer(const uint8_t* in, uint64_t size, uint64_t stored_size, BlockTrailer* out);
// `in`: the last kBlockTrailerBytes of a raw member's stored bytes (Codec::kRawBlocks). False
// when it does not describe a member of `size` bytes stored in `stored_size`.
bool CheckRawBlocksTrailer(const uint8_t* in, uint64_t size, uint64_t stored_size);
// `in`: entry b of the table. False when its stream lies outside [0, table_offset) or is
// empty.
bool DecodeBlockEntry(const uint8_t* in, const BlockTrailer& t, BlockEntry* out);

}  // namespace fanstore::meta
