#include "meta/partition_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "compress/crc32c.h"
#include "compress/inflate.h"
#include "meta/blocks.h"
#include "meta/endian.h"

namespace fanstore::meta {

PartitionReader::~PartitionReader() {
  if (fd_ >= 0) ::close(fd_);
}

PartitionReader::PartitionReader(PartitionReader&& o) noexcept
    : fd_(o.fd_),
      name_(std::move(o.name_)),
      file_size_(o.file_size_),
      count_(o.count_),
      header_(o.header_),
      footer_(o.footer_),
      index_(std::move(o.index_)),
      strings_(std::move(o.strings_)) {
  o.fd_ = -1;
}

Status PartitionReader::Pread(uint64_t off, void* buf, size_t n) const {
  auto* p = static_cast<uint8_t*>(buf);
  while (n > 0) {
    const ssize_t r = ::pread(fd_, p, n, static_cast<off_t>(off));
    if (r < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(name_, errno);
    }
    if (r == 0) return Status::Error(name_ + ": unexpected end of file (truncated?)");
    p += r;
    n -= static_cast<size_t>(r);
    off += static_cast<uint64_t>(r);
  }
  return Status::Ok();
}

Status PartitionReader::Open(const std::string& file) {
  name_ = file;
  fd_ = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) return Status::FromErrno(file, errno);
  struct stat st;
  if (::fstat(fd_, &st) != 0) return Status::FromErrno(file, errno);
  if (!S_ISREG(st.st_mode)) return Status::Error(file + ": not a regular file");
  file_size_ = static_cast<uint64_t>(st.st_size);
  if (file_size_ < kDataStart + PartitionFooter::kSize)
    return Status::Error(file + ": truncated (" + std::to_string(file_size_) + " bytes)");

  uint8_t buf[64];
  FANSTORE_RETURN_IF_ERROR(Pread(0, buf, sizeof buf));
  if (Status s = PartitionHeader::DecodeFrom(buf, &header_); !s.ok())
    return Status::Error(file + ": " + s.message());
  FANSTORE_RETURN_IF_ERROR(Pread(file_size_ - PartitionFooter::kSize, buf, sizeof buf));
  if (Status s = PartitionFooter::DecodeFrom(buf, &footer_); !s.ok())
    return Status::Error(file + ": " + s.message());

  const PartitionFooter& f = footer_;
  const uint64_t footer_at = file_size_ - PartitionFooter::kSize;
  const bool layout_ok =
      f.partition_id == header_.partition_id && f.dataset_id == header_.dataset_id &&
      f.member_count == header_.member_count && f.index_offset == header_.data_end &&
      f.index_offset >= kDataStart && f.index_offset % 8 == 0 &&
      f.member_count <= (footer_at - f.index_offset) / IndexRecord::kSize &&
      f.strings_offset == f.index_offset + f.member_count * IndexRecord::kSize &&
      f.strings_size <= footer_at - f.strings_offset &&
      f.strings_offset + f.strings_size == footer_at &&
      header_.partition_id < header_.partition_count;
  if (!layout_ok)
    return Status::Error(file + ": header and footer disagree (damaged or truncated)");

  count_ = static_cast<size_t>(f.member_count);
  index_.resize(count_ * IndexRecord::kSize);
  strings_.resize(static_cast<size_t>(f.strings_size));
  FANSTORE_RETURN_IF_ERROR(Pread(f.index_offset, index_.data(), index_.size()));
  FANSTORE_RETURN_IF_ERROR(Pread(f.strings_offset, strings_.data(), strings_.size()));
  uint32_t crc = compress::Crc32c(0, index_.data(), index_.size());
  crc = compress::Crc32c(crc, strings_.data(), strings_.size());
  if (crc != f.index_crc) return Status::Error(file + ": index checksum mismatch");
  return CheckRecords();
}

std::string PartitionReader::Where(size_t i) const {
  const IndexRecord r = IndexRecord::DecodeFrom(index_.data() + i * IndexRecord::kSize);
  // (appended piece by piece: gcc 12 at -O3 sees a false -Wrestrict in "'" + s + "'")
  std::string out = name_ + ": member ";
  if (r.path_offset <= strings_.size() && r.path_length <= strings_.size() - r.path_offset) {
    out += '\'';
    out += ShownPath(std::string_view(strings_).substr(r.path_offset, r.path_length));
    out += '\'';
  } else {
    out += '#';
    out += std::to_string(i);
  }
  return out;
}

Status PartitionReader::CheckRecords() {
  const uint64_t data_end = footer_.index_offset;
  std::string_view prev;
  for (size_t i = 0; i < count_; ++i) {
    const IndexRecord r = IndexRecord::DecodeFrom(index_.data() + i * IndexRecord::kSize);
    auto bad = [&](const char* why) { return Status::Error(Where(i) + ": " + why); };
    if (r.path_offset > strings_.size() || r.path_length > strings_.size() - r.path_offset)
      return bad("path outside the string table");
    if (r.path_length > kMaxPathBytes)
      return Status::Error(Where(i) + ": path longer than " + std::to_string(kMaxPathBytes) +
                           " bytes");
    const std::string_view path(strings_.data() + r.path_offset, r.path_length);
    if (!IsValidMemberPath(path)) return bad("malformed path");
    if (i > 0 && path <= prev) return bad("index not in path order");
    prev = path;
    if (r.reserved != 0) return bad("reserved field set");
    if (r.mode > 0xFFFF) return bad("mode beyond st_mode's 16 bits");  // (the image keeps 16)
    const auto kind = static_cast<Kind>(r.kind);
    const auto codec = static_cast<Codec>(r.codec);
    if (r.codec > kMaxCodec) return bad("unknown codec");
    if (codec == Codec::kDeflateBlocks && header_.version < 3)
      return bad("block-deflated member in a partition of format 1 or 2");
    if (codec == Codec::kRawBlocks && header_.version < 4)
      return bad("raw member with block checksums in a partition of format 1 to 3");
    switch (kind) {
      case Kind::kDir:
        if (!S_ISDIR(r.mode) || r.stored_size != 0) return bad("inconsistent directory record");
        break;
      case Kind::kSymlink:
        if (!S_ISLNK(r.mode) || r.stored_size != 0 ||
            r.size > strings_.size() - r.path_offset - r.path_length)
          return bad("inconsistent symlink record");
        break;
      case Kind::kFile:
        if (!S_ISREG(r.mode)) return bad("inconsistent file record");
        if (r.stored_size > 0 && (r.data_offset < kDataStart || r.data_offset > data_end ||
                                  r.stored_size > data_end - r.data_offset))
          return bad("data outside the partition's data region");
        if (codec == Codec::kRaw &&
            (r.stored_size != r.size || (AlignedRaw(r.size) && r.data_offset % kBlockAlign != 0)))
          return bad("inconsistent raw member");
        if (codec == Codec::kRawBlocks &&
            (r.size == 0 || BlockCount(r.size) > UINT32_MAX ||
             r.stored_size != RawBlocksStoredBytes(r.size) ||
             (AlignedRaw(r.size) && r.data_offset % kBlockAlign != 0)))
          return bad("inconsistent raw member with block checksums");
        if (!StoredRaw(codec) && (r.stored_size == 0 || r.size == 0))
          return bad("inconsistent compressed member");
        if (codec == Codec::kDeflateBlocks &&
            (r.stored_size < BlockTableBytes(BlockCount(r.size)) ||
             BlockCount(r.size) > UINT32_MAX))
          return bad("inconsistent block-deflated member");
        break;
      default:
        return bad("unknown member kind");
    }
    if (path.empty() && kind != Kind::kDir) return bad("root is not a directory");
  }
  return Status::Ok();
}

MemberView PartitionReader::member(size_t i) const {
  MemberView v;
  v.rec = IndexRecord::DecodeFrom(index_.data() + i * IndexRecord::kSize);
  v.path = std::string_view(strings_.data() + v.rec.path_offset, v.rec.path_length);
  if (v.kind() == Kind::kSymlink)
    v.target = std::string_view(strings_.data() + v.rec.path_offset + v.rec.path_length,
                                static_cast<size_t>(v.rec.size));
  return v;
}

Status PartitionReader::ReadMember(size_t i,
                                   const std::function<bool(std::span<const uint8_t>)>& sink,
                                   size_t chunk) const {
  const MemberView m = member(i);
  const IndexRecord& r = m.rec;
  if (m.kind() == Kind::kDir) return Status::Error(Where(i) + ": is a directory");
  if (m.kind() == Kind::kSymlink) {
    sink({reinterpret_cast<const uint8_t*>(m.target.data()), m.target.size()});
    return Status::Ok();
  }
  auto mismatch = [&] { return Status::Error(Where(i) + ": checksum mismatch (damaged data)"); };
  if (m.codec() == Codec::kDeflateBlocks) return ReadBlocks(i, sink, chunk);
  if (m.codec() == Codec::kRawBlocks) return ReadRawBlocks(i, sink);

  if (r.size <= chunk && r.stored_size <= chunk) {
    std::vector<uint8_t> stored(r.stored_size);
    FANSTORE_RETURN_IF_ERROR(Pread(r.data_offset, stored.data(), stored.size()));
    std::vector<uint8_t> plain;
    if (m.codec() == Codec::kDeflate) {
      plain.resize(r.size);
      if (compress::InflateExact(stored, plain) != 0)
        return Status::Error(Where(i) + ": damaged compressed data");
    } else {
      plain = std::move(stored);
    }
    if (compress::Crc32c(0, plain.data(), plain.size()) != r.crc32c) return mismatch();
    if (!plain.empty()) sink(plain);
    return Status::Ok();
  }

  // Large member: stream, verifying the checksum at the end.
  uint32_t crc = 0;
  uint64_t in_pos = 0, out_total = 0;
  std::vector<uint8_t> in(std::min<uint64_t>(chunk, r.stored_size));
  if (m.codec() == Codec::kRaw) {
    while (in_pos < r.stored_size) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(in.size(), r.stored_size - in_pos));
      FANSTORE_RETURN_IF_ERROR(Pread(r.data_offset + in_pos, in.data(), n));
      in_pos += n;
      crc = compress::Crc32c(crc, in.data(), n);
      if (!sink({in.data(), n})) return Status::Ok();
    }
    return crc == r.crc32c ? Status::Ok() : mismatch();
  }
  compress::Inflater inf;
  std::vector<uint8_t> out(chunk);
  size_t in_have = 0, in_used = 0;
  for (;;) {
    if (in_used == in_have && in_pos < r.stored_size) {
      in_have = static_cast<size_t>(std::min<uint64_t>(in.size(), r.stored_size - in_pos));
      FANSTORE_RETURN_IF_ERROR(Pread(r.data_offset + in_pos, in.data(), in_have));
      in_pos += in_have;
      in_used = 0;
    }
    size_t consumed = 0, produced = 0;
    const int rc = inf.Step({in.data() + in_used, in_have - in_used}, out, &consumed, &produced);
    in_used += consumed;
    if (rc < 0 || out_total + produced > r.size)
      return Status::Error(Where(i) + ": damaged compressed data");
    out_total += produced;
    crc = compress::Crc32c(crc, out.data(), produced);
    if (produced && !sink({out.data(), produced})) return Status::Ok();
    if (rc == 1) break;
    if (consumed == 0 && produced == 0 && in_used == in_have && in_pos == r.stored_size)
      return Status::Error(Where(i) + ": damaged compressed data (stream ends early)");
  }
  if (out_total != r.size) return Status::Error(Where(i) + ": damaged compressed data (size)");
  return crc == r.crc32c ? Status::Ok() : mismatch();
}

// A block-deflated member (meta/blocks.h), block by block: the table must cover the streams
// exactly, in order, and every block's checksum and then the member's must match.
Status PartitionReader::ReadBlocks(size_t i,
                                   const std::function<bool(std::span<const uint8_t>)>& sink,
                                   size_t chunk) const {
  const IndexRecord r = member(i).rec;
  if (chunk == 0) chunk = kDeflateBlockBytes;
  auto damaged = [&](const std::string& why) {
    return Status::Error(Where(i) + ": damaged compressed data (" + why + ")");
  };
  uint8_t tail[kBlockTrailerBytes];
  FANSTORE_RETURN_IF_ERROR(Pread(r.data_offset + r.stored_size - sizeof tail, tail, sizeof tail));
  BlockTrailer t;
  if (!DecodeBlockTrailer(tail, r.size, r.stored_size, &t)) return damaged("block trailer");
  std::vector<uint8_t> table(t.count * kBlockEntryBytes);
  FANSTORE_RETURN_IF_ERROR(Pread(r.data_offset + t.table_offset, table.data(), table.size()));
  std::vector<uint8_t> stored, plain(kDeflateBlockBytes);
  uint64_t expect = 0;
  uint32_t crc = 0;
  for (uint32_t b = 0; b < t.count; ++b) {
    const std::string block = "block " + std::to_string(b);
    BlockEntry e;
    if (!DecodeBlockEntry(table.data() + b * kBlockEntryBytes, t, &e) || e.offset != expect)
      return damaged(block + ": table entry");
    expect = e.offset + e.length;
    if (b + 1 == t.count && expect != t.table_offset)
      return damaged("table does not end the streams");
    stored.resize(e.length);
    FANSTORE_RETURN_IF_ERROR(Pread(r.data_offset + e.offset, stored.data(), stored.size()));
    const std::span<uint8_t> out(plain.data(), BlockPlainBytes(r.size, b));
    if (compress::InflateExact(stored, out) != 0) return damaged(block);
    if (compress::Crc32c(0, out.data(), out.size()) != e.crc32c)
      return Status::Error(Where(i) + ": checksum mismatch in " + block + " (damaged data)");
    crc = compress::Crc32c(crc, out.data(), out.size());
    for (size_t at = 0; at < out.size(); at += chunk)
      if (!sink(out.subspan(at, std::min(chunk, out.size() - at)))) return Status::Ok();
  }
  if (crc != r.crc32c) return Status::Error(Where(i) + ": checksum mismatch (damaged data)");
  return Status::Ok();
}

// A raw member with block checksums (meta/blocks.h), block by block: the trailer, every
// block's checksum and then the member's must match.
Status PartitionReader::ReadRawBlocks(
    size_t i, const std::function<bool(std::span<const uint8_t>)>& sink) const {
  const IndexRecord r = member(i).rec;
  const uint64_t count = BlockCount(r.size);
  std::vector<uint8_t> table(count * kRawBlockCrcBytes + kBlockTrailerBytes);
  FANSTORE_RETURN_IF_ERROR(Pread(r.data_offset + r.size, table.data(), table.size()));
  if (!CheckRawBlocksTrailer(table.data() + table.size() - kBlockTrailerBytes, r.size,
                             r.stored_size))
    return Status::Error(Where(i) + ": damaged block checksums (trailer)");
  std::vector<uint8_t> block(kDeflateBlockBytes);
  uint32_t crc = 0;
  for (uint64_t b = 0; b < count; ++b) {
    const std::span<uint8_t> out(block.data(), BlockPlainBytes(r.size, b));
    FANSTORE_RETURN_IF_ERROR(Pread(r.data_offset + b * kDeflateBlockBytes, out.data(), out.size()));
    if (compress::Crc32c(0, out.data(), out.size()) != GetU32(table.data() + b * kRawBlockCrcBytes))
      return Status::Error(Where(i) + ": checksum mismatch in block " + std::to_string(b) +
                           " (damaged data)");
    crc = compress::Crc32c(crc, out.data(), out.size());
    if (!sink(out)) return Status::Ok();
  }
  if (crc != r.crc32c) return Status::Error(Where(i) + ": checksum mismatch (damaged data)");
  return Status::Ok();
}

Result<std::vector<uint8_t>> PartitionReader::ReadAll(size_t i, uint64_t limit) const {
  const MemberView m = member(i);
  if (m.rec.size > limit) return Status::Error(Where(i) + ": too large to read whole");
  std::vector<uint8_t> all;
  all.reserve(static_cast<size_t>(m.rec.size));
  Status s = ReadMember(i, [&](std::span<const uint8_t> b) {
    all.insert(all.end(), b.begin(), b.end());
    return true;
  });
  if (!s.ok()) return s;
  return all;
}

}  // namespace fanstore::meta
