// PartitionWriter: writes one partition blob front to back (header block, member data,
// index, string table, footer), then rewrites the header. Members must be added in
// strictly increasing path order. Buffered; nothing is durable until Finish() returns ok.
// Thread-safety: one thread per writer.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "meta/member.h"

namespace fanstore::meta {

struct PartitionSummary {
  uint32_t id = 0;
  uint32_t flags = 0;
  uint64_t members = 0;
  uint64_t bytes = 0;      // uncompressed file bytes
  uint64_t stored = 0;     // stored file bytes
  uint64_t file_size = 0;  // of the blob
  uint32_t index_crc = 0;
};

class PartitionWriter {
 public:
  PartitionWriter() = default;
  ~PartitionWriter();
  PartitionWriter(const PartitionWriter&) = delete;
  PartitionWriter& operator=(const PartitionWriter&) = delete;

  Status Open(const std::string& file, uint32_t id, uint32_t count, uint32_t flags,
              uint64_t dataset_id);

  // Starts the data of a member stored as `stored_size` bytes: raw data of a block or more
  // is aligned to kBlockAlign (AlignedRaw); returns the data offset.
  Result<uint64_t> BeginData(Codec codec, uint64_t stored_size);
  Status Write(std::span<const uint8_t> bytes);
  // Records a member; for members with data, `m.data_offset`, `stored_size`, `codec` and
  // `crc32c` describe what BeginData/Write produced.
  Status Add(const Member& m);
  // Discards the bytes written since `offset` (a BeginData result): used when a streamed
  // member turns out not to compress and is written again raw.
  Status Rewind(uint64_t offset);

  // Changes what Open was told of the partition's place: the archive packer learns the
  // count, and so the dataset id, only once every member is written. Before Finish.
  void Relabel(uint32_t id, uint32_t count, uint64_t dataset_id) {
    summary_.id = id;
    count_ = count;
    dataset_id_ = dataset_id;
  }

  Result<PartitionSummary> Finish();
  uint64_t offset() const { return offset_; }
  // Bytes free for this user on the file system the partition is written to (UINT64_MAX
  // when that cannot be asked): a member larger than this is refused before it is written.
  uint64_t FreeBytes() const;

 private:
  Status Flush();
  Status WriteAt(uint64_t off, const uint8_t* p, size_t n);

  int fd_ = -1;
  std::string file_;
  uint64_t offset_ = 0;       // logical end of what was written
  std::vector<uint8_t> buf_;  // pending bytes at [offset_ - buf_.size(), offset_)
  std::vector<uint8_t> index_;
  std::string strings_;
  std::string last_path_;
  bool any_ = false;
  PartitionSummary summary_;
  uint32_t count_ = 0;
  uint64_t dataset_id_ = 0;
};

}  // namespace fanstore::meta
