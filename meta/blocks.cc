#include "meta/blocks.h"

#include "meta/endian.h"

namespace fanstore::meta {

void EncodeBlockEntry(const BlockEntry& e, uint8_t* out) {
  PutU64(out, e.offset);
  PutU32(out + 8, e.length);
  PutU32(out + 12, e.crc32c);
}

void EncodeBlockTrailer(uint32_t count, uint8_t* out) {
  PutU32(out, kDeflateBlockBytes);
  PutU32(out + 4, count);
}

bool DecodeBlockTrailer(const uint8_t* in, uint64_t size, uint64_t stored_size, BlockTrailer* out) {
  BlockTrailer t{GetU32(in), GetU32(in + 4), 0};
  if (size == 0 || t.block_bytes != kDeflateBlockBytes || t.count != BlockCount(size)) return false;
  const uint64_t table = BlockTableBytes(t.count);
  // Every block's stream takes at least one byte.
  if (stored_size < table || stored_size - table < t.count) return false;
  t.table_offset = stored_size - table;
  *out = t;
  return true;
}

bool CheckRawBlocksTrailer(const uint8_t* in, uint64_t size, uint64_t stored_size) {
  return size > 0 && GetU32(in) == kDeflateBlockBytes && GetU32(in + 4) == BlockCount(size) &&
         stored_size == RawBlocksStoredBytes(size);
}

bool DecodeBlockEntry(const uint8_t* in, const BlockTrailer& t, BlockEntry* out) {
  const BlockEntry e{GetU64(in), GetU32(in + 8), GetU32(in + 12)};
  if (e.length == 0 || e.offset > t.table_offset || e.length > t.table_offset - e.offset)
    return false;
  *out = e;
  return true;
}

}  // namespace fanstore::meta
