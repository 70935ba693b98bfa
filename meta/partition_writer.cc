#include "meta/partition_writer.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>

#include "compress/crc32c.h"

namespace fanstore::meta {
namespace {
constexpr size_t kBufSize = 4 << 20;
}

PartitionWriter::~PartitionWriter() {
  if (fd_ >= 0) ::close(fd_);
}

Status PartitionWriter::Open(const std::string& file, uint32_t id, uint32_t count, uint32_t flags,
                             uint64_t dataset_id) {
  file_ = file;
  fd_ = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) return Status::FromErrno(file, errno);
  summary_ = PartitionSummary{.id = id, .flags = flags};
  count_ = count;
  dataset_id_ = dataset_id;
  buf_.reserve(kBufSize);
  buf_.assign(kDataStart, 0);  // header placeholder; rewritten by Finish()
  offset_ = kDataStart;
  return Status::Ok();
}

Status PartitionWriter::WriteAt(uint64_t off, const uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd_, p, n, static_cast<off_t>(off));
    if (w < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(file_, errno);
    }
    p += w;
    n -= static_cast<size_t>(w);
    off += static_cast<uint64_t>(w);
  }
  return Status::Ok();
}

Status PartitionWriter::Flush() {
  if (buf_.empty()) return Status::Ok();
  FANSTORE_RETURN_IF_ERROR(WriteAt(offset_ - buf_.size(), buf_.data(), buf_.size()));
  buf_.clear();
  return Status::Ok();
}

Status PartitionWriter::Write(std::span<const uint8_t> bytes) {
  if (bytes.size() >= kBufSize) {
    FANSTORE_RETURN_IF_ERROR(Flush());
    FANSTORE_RETURN_IF_ERROR(WriteAt(offset_, bytes.data(), bytes.size()));
    offset_ += bytes.size();
    return Status::Ok();
  }
  if (buf_.size() + bytes.size() > kBufSize) FANSTORE_RETURN_IF_ERROR(Flush());
  buf_.insert(buf_.end(), bytes.begin(), bytes.end());
  offset_ += bytes.size();
  return Status::Ok();
}

Result<uint64_t> PartitionWriter::BeginData(Codec codec, uint64_t stored_size) {
  if (StoredRaw(codec) && AlignedRaw(stored_size)) {
    const uint64_t pad = (kBlockAlign - offset_ % kBlockAlign) % kBlockAlign;
    if (pad) {
      static const uint8_t zeros[kBlockAlign] = {};
      FANSTORE_RETURN_IF_ERROR(Write({zeros, pad}));
    }
  }
  return offset_;
}

uint64_t PartitionWriter::FreeBytes() const {
  struct statvfs vfs;
  if (fd_ < 0 || ::fstatvfs(fd_, &vfs) != 0) return UINT64_MAX;
  return static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
}

Status PartitionWriter::Rewind(uint64_t offset) {
  FANSTORE_RETURN_IF_ERROR(Flush());
  if (offset > offset_ || offset < kDataStart) return Status::Error(file_ + ": bad rewind");
  offset_ = offset;
  if (::ftruncate(fd_, static_cast<off_t>(offset)) != 0) return Status::FromErrno(file_, errno);
  return Status::Ok();
}

Status PartitionWriter::Add(const Member& m) {
  if (any_ && m.path <= last_path_)
    return Status::Error(file_ + ": members out of order at '" + m.path + "'");
  any_ = true;
  last_path_ = m.path;
  IndexRecord r{};
  r.data_offset = m.data_offset;
  r.size = m.size;
  r.stored_size = m.stored_size;
  r.mtime_ns = m.mtime_ns;
  r.path_offset = strings_.size();
  r.path_length = static_cast<uint32_t>(m.path.size());
  r.mode = m.mode;
  r.uid = m.uid;
  r.gid = m.gid;
  r.crc32c = m.crc32c;
  r.kind = static_cast<uint8_t>(m.kind);
  r.codec = static_cast<uint8_t>(m.codec);
  strings_ += m.path;
  if (m.kind == Kind::kSymlink) {
    strings_ += m.target;
    r.size = m.target.size();
    r.crc32c = compress::Crc32c(0, m.target.data(), m.target.size());
  }
  const size_t at = index_.size();
  index_.resize(at + IndexRecord::kSize);
  r.EncodeTo(index_.data() + at);
  ++summary_.members;
  if (m.kind == Kind::kFile) {
    summary_.bytes += m.size;
    summary_.stored += m.stored_size;
  }
  return Status::Ok();
}

Result<PartitionSummary> PartitionWriter::Finish() {
  // Index starts 8-aligned after the data.
  const uint64_t pad = (8 - offset_ % 8) % 8;
  static const uint8_t zeros[8] = {};
  FANSTORE_RETURN_IF_ERROR(Write({zeros, pad}));
  const uint64_t index_offset = offset_;
  uint32_t crc = compress::Crc32c(0, index_.data(), index_.size());
  crc = compress::Crc32c(crc, strings_.data(), strings_.size());
  FANSTORE_RETURN_IF_ERROR(Write(index_));
  FANSTORE_RETURN_IF_ERROR(
      Write({reinterpret_cast<const uint8_t*>(strings_.data()), strings_.size()}));

  PartitionFooter f{};
  f.version = kFormatVersion;
  f.partition_id = summary_.id;
  f.index_offset = index_offset;
  f.member_count = summary_.members;
  f.strings_offset = index_offset + index_.size();
  f.strings_size = strings_.size();
  f.dataset_id = dataset_id_;
  f.index_crc = crc;
  uint8_t fb[PartitionFooter::kSize];
  f.EncodeTo(fb);
  FANSTORE_RETURN_IF_ERROR(Write(fb));
  FANSTORE_RETURN_IF_ERROR(Flush());

  PartitionHeader h{};
  h.version = kFormatVersion;
  h.flags = summary_.flags;
  h.partition_id = summary_.id;
  h.partition_count = count_;
  h.dataset_id = dataset_id_;
  h.member_count = summary_.members;
  h.data_end = index_offset;
  uint8_t hb[PartitionHeader::kSize];
  h.EncodeTo(hb);
  FANSTORE_RETURN_IF_ERROR(WriteAt(0, hb, sizeof hb));
  if (::fsync(fd_) != 0) return Status::FromErrno(file_, errno);
  if (::close(fd_) != 0) {
    fd_ = -1;
    return Status::FromErrno(file_, errno);
  }
  fd_ = -1;
  summary_.file_size = offset_;
  summary_.index_crc = crc;
  return summary_;
}

}  // namespace fanstore::meta
