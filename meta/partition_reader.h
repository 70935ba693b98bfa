// PartitionReader: opens one partition blob, checks its header, footer and index (magic,
// version, checksums, and that every record's offsets, sizes and path lie inside the file),
// and reads members' bytes with their CRC32C checked. Errors name the file and member.
// Thread-safety: after Open, all const methods may be called from any number of threads
// (reads use pread on a shared fd).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "meta/format.h"
#include "meta/member.h"

namespace fanstore::meta {

// A decoded index record with views into the reader's string table.
struct MemberView {
  std::string_view path;
  std::string_view target;  // symlinks only
  IndexRecord rec;
  Kind kind() const { return static_cast<Kind>(rec.kind); }
  Codec codec() const { return static_cast<Codec>(rec.codec); }
};

class PartitionReader {
 public:
  PartitionReader() = default;
  ~PartitionReader();
  PartitionReader(PartitionReader&&) noexcept;
  PartitionReader& operator=(PartitionReader&&) = delete;
  PartitionReader(const PartitionReader&) = delete;

  // Opens and fully validates the metadata of `file`. `name` is used in messages.
  Status Open(const std::string& file);

  const std::string& name() const { return name_; }
  const PartitionHeader& header() const { return header_; }
  const PartitionFooter& footer() const { return footer_; }
  uint64_t file_size() const { return file_size_; }
  size_t size() const { return count_; }
  MemberView member(size_t i) const;
  int fd() const { return fd_; }

  // Streams member i's uncompressed bytes to `sink` in chunks (at most `chunk` bytes each;
  // a small member is delivered whole, after its checksum was verified). A larger member's
  // checksum is checked at the end, so a failed Status may follow delivered bytes.
  // `sink` returns false to stop early (Status ok).
  Status ReadMember(size_t i, const std::function<bool(std::span<const uint8_t>)>& sink,
                    size_t chunk = 8 << 20) const;
  // Reads a member whole (files and symlinks). Fails for sizes over `limit`.
  Result<std::vector<uint8_t>> ReadAll(size_t i, uint64_t limit = 1ull << 32) const;

 private:
  Status Pread(uint64_t off, void* buf, size_t n) const;
  Status CheckRecords();
  Status ReadBlocks(size_t i, const std::function<bool(std::span<const uint8_t>)>& sink,
                    size_t chunk) const;
  Status ReadRawBlocks(size_t i, const std::function<bool(std::span<const uint8_t>)>& sink) const;
  std::string Where(size_t i) const;

  int fd_ = -1;
  std::string name_;
  uint64_t file_size_ = 0;
  size_t count_ = 0;
  PartitionHeader header_{};
  PartitionFooter footer_{};
  std::vector<uint8_t> index_;  // raw index records
  std::string strings_;
};

}  // namespace fanstore::meta
