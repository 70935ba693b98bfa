#include "meta/format.h"

#include <cstdio>
#include <cstring>
#include <string>

#include "compress/crc32c.h"
#include "meta/endian.h"

namespace fanstore::meta {

#define PUT(bits, field) PutU##bits(out + offsetof(Self, field), static_cast<uint##bits##_t>(field))
#define GET(bits, field) GetU##bits(in + offsetof(Self, field))

const char* KindName(Kind k) {
  switch (k) {
    case Kind::kFile:
      return "file";
    case Kind::kDir:
      return "directory";
    case Kind::kSymlink:
      return "symlink";
  }
  return "unknown";
}

const char* CodecName(Codec c) {
  switch (c) {
    case Codec::kRaw:
      return "raw";
    case Codec::kDeflate:
      return "deflate";
    case Codec::kDeflateBlocks:
      return "deflate-blocks";
    case Codec::kRawBlocks:
      return "raw-blocks";
  }
  return "unknown";
}

std::string PartitionFileName(uint32_t id) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "part-%05u.fsb", id);
  return buf;
}

void PartitionHeader::EncodeTo(uint8_t* out) const {
  using Self = PartitionHeader;
  std::memset(out, 0, kSize);
  std::memcpy(out, kPartitionMagic.data(), 8);
  PUT(32, version);
  PUT(32, flags);
  PUT(32, partition_id);
  PUT(32, partition_count);
  PUT(64, dataset_id);
  PUT(64, member_count);
  PUT(64, data_end);
  PutU32(out + offsetof(Self, header_crc), compress::Crc32c(0, out, 60));
}

Status PartitionHeader::DecodeFrom(const uint8_t* in, PartitionHeader* h) {
  using Self = PartitionHeader;
  if (std::memcmp(in, kPartitionMagic.data(), 8) != 0)
    return Status::Error("not a FanStore partition (bad header magic)");
  h->version = GET(32, version);
  if (h->version < kMinFormatVersion || h->version > kFormatVersion)
    return Status::Error("unsupported format version " + std::to_string(h->version) +
                         " (this build reads " + std::to_string(kMinFormatVersion) + " to " +
                         std::to_string(kFormatVersion) + ")");
  h->header_crc = GET(32, header_crc);
  if (compress::Crc32c(0, in, 60) != h->header_crc)
    return Status::Error("header checksum mismatch");
  std::memcpy(h->magic, in, 8);
  h->flags = GET(32, flags);
  h->partition_id = GET(32, partition_id);
  h->partition_count = GET(32, partition_count);
  h->dataset_id = GET(64, dataset_id);
  h->member_count = GET(64, member_count);
  h->data_end = GET(64, data_end);
  h->reserved0 = 0;
  h->reserved1 = 0;
  return Status::Ok();
}

void IndexRecord::EncodeTo(uint8_t* out) const {
  using Self = IndexRecord;
  PUT(64, data_offset);
  PUT(64, size);
  PUT(64, stored_size);
  PUT(64, mtime_ns);
  PUT(64, path_offset);
  PUT(32, path_length);
  PUT(32, mode);
  PUT(32, uid);
  PUT(32, gid);
  PUT(32, crc32c);
  out[offsetof(Self, kind)] = kind;
  out[offsetof(Self, codec)] = codec;
  PUT(16, reserved);
}

IndexRecord IndexRecord::DecodeFrom(const uint8_t* in) {
  using Self = IndexRecord;
  IndexRecord r;
  r.data_offset = GET(64, data_offset);
  r.size = GET(64, size);
  r.stored_size = GET(64, stored_size);
  r.mtime_ns = static_cast<int64_t>(GET(64, mtime_ns));
  r.path_offset = GET(64, path_offset);
  r.path_length = GET(32, path_length);
  r.mode = GET(32, mode);
  r.uid = GET(32, uid);
  r.gid = GET(32, gid);
  r.crc32c = GET(32, crc32c);
  r.kind = in[offsetof(Self, kind)];
  r.codec = in[offsetof(Self, codec)];
  r.reserved = GET(16, reserved);
  return r;
}

void PartitionFooter::EncodeTo(uint8_t* out) const {
  using Self = PartitionFooter;
  std::memcpy(out, kFooterMagic.data(), 8);
  PUT(32, version);
  PUT(32, partition_id);
  PUT(64, index_offset);
  PUT(64, member_count);
  PUT(64, strings_offset);
  PUT(64, strings_size);
  PUT(64, dataset_id);
  PUT(32, index_crc);
  PutU32(out + offsetof(Self, footer_crc), compress::Crc32c(0, out, 60));
}

Status PartitionFooter::DecodeFrom(const uint8_t* in, PartitionFooter* f) {
  using Self = PartitionFooter;
  if (std::memcmp(in, kFooterMagic.data(), 8) != 0)
    return Status::Error("bad footer magic (truncated or not a FanStore partition)");
  f->version = GET(32, version);
  if (f->version < kMinFormatVersion || f->version > kFormatVersion)
    return Status::Error("unsupported format version " + std::to_string(f->version) + " in footer");
  f->footer_crc = GET(32, footer_crc);
  if (compress::Crc32c(0, in, 60) != f->footer_crc)
    return Status::Error("footer checksum mismatch");
  std::memcpy(f->magic, in, 8);
  f->partition_id = GET(32, partition_id);
  f->index_offset = GET(64, index_offset);
  f->member_count = GET(64, member_count);
  f->strings_offset = GET(64, strings_offset);
  f->strings_size = GET(64, strings_size);
  f->dataset_id = GET(64, dataset_id);
  f->index_crc = GET(32, index_crc);
  return Status::Ok();
}

#undef PUT
#undef GET

}  // namespace fanstore::meta
