#include "meta/exchange.h"

#include <algorithm>
#include <cstring>

namespace fanstore::meta {
namespace {

constexpr uint8_t kModeSame = 1u << 4, kOwnerSame = 1u << 5, kStoredIsSize = 1u << 6,
                  kReservedBit = 1u << 7;

void PutVarint(std::string* out, uint64_t v) {
  char b[10];
  int n = 0;
  while (v >= 0x80) {
    b[n++] = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  b[n++] = static_cast<char>(v);
  out->append(b, static_cast<size_t>(n));
}

uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
int64_t UnZigZag(uint64_t v) {
  return static_cast<int64_t>((v >> 1) ^ (~(v & 1) + 1));
}

void PutLe(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
uint64_t GetLe(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{static_cast<uint8_t>(p[i])} << (8 * i);
  return v;
}

}  // namespace

BlockEncoder::BlockEncoder(uint32_t partition, std::string* out)
    : out_(out), header_at_(out->size()) {
  PutLe(out_, partition, 4);
  out_->append(kBlockHeaderSize - 4, '\0');  // counts, written by Finish()
}

void BlockEncoder::Add(const NsMember& m) {
  const IndexRecord& r = m.rec;
  uint8_t head = static_cast<uint8_t>((r.kind & 3) | (r.codec & 3) << 2);
  if (r.mode == prev_.mode) head |= kModeSame;
  if (r.uid == prev_.uid && r.gid == prev_.gid) head |= kOwnerSame;
  if (r.stored_size == r.size) head |= kStoredIsSize;
  out_->push_back(static_cast<char>(head));
  size_t shared = 0;
  const size_t limit = std::min(prev_path_.size(), m.path.size());
  while (shared < limit && prev_path_[shared] == m.path[shared]) ++shared;
  PutVarint(out_, shared);
  PutVarint(out_, m.path.size() - shared);
  out_->append(m.path.substr(shared));
  if (!(head & kModeSame)) PutVarint(out_, r.mode);
  if (!(head & kOwnerSame)) {
    PutVarint(out_, r.uid);
    PutVarint(out_, r.gid);
  }
  PutVarint(out_, r.size);
  if (!(head & kStoredIsSize)) PutVarint(out_, r.stored_size);
  PutVarint(out_, ZigZag(static_cast<int64_t>(r.data_offset - prev_.data_offset)));
  PutVarint(out_, ZigZag(static_cast<int64_t>(static_cast<uint64_t>(r.mtime_ns) -
                                              static_cast<uint64_t>(prev_.mtime_ns))));
  PutLe(out_, r.crc32c, 4);
  out_->append(m.target);
  prev_path_.assign(m.path);
  prev_ = r;
  ++count_;
  string_bytes_ += m.path.size() + m.target.size();
}

void BlockEncoder::Finish() {
  char h[kBlockHeaderSize - 4];
  const uint64_t record_bytes = out_->size() - header_at_ - kBlockHeaderSize;
  for (int i = 0; i < 4; ++i) h[i] = static_cast<char>(count_ >> (8 * i));
  for (int i = 0; i < 8; ++i) h[4 + i] = static_cast<char>(string_bytes_ >> (8 * i));
  for (int i = 0; i < 8; ++i) h[12 + i] = static_cast<char>(record_bytes >> (8 * i));
  out_->replace(header_at_ + 4, sizeof h, h, sizeof h);
}

void EncodeMembers(const PartitionReader& reader, uint32_t id, std::string* out) {
  BlockEncoder enc(id, out);
  for (size_t i = 0; i < reader.size(); ++i) {
    const MemberView v = reader.member(i);
    enc.Add(NsMember{v.path, v.target, v.rec});
  }
  enc.Finish();
}

Result<std::vector<ExchangeBlock>> SplitBlocks(std::string_view bytes, uint32_t partitions) {
  std::vector<ExchangeBlock> blocks;
  uint64_t pos = 0;
  while (pos < bytes.size()) {
    const std::string at = "namespace exchange: block at byte " + std::to_string(pos);
    if (bytes.size() - pos < kBlockHeaderSize) return Status::Error(at + ": truncated header");
    ExchangeBlock b;
    const char* h = bytes.data() + pos;
    b.partition = static_cast<uint32_t>(GetLe(h, 4));
    b.count = static_cast<uint32_t>(GetLe(h + 4, 4));
    b.string_bytes = GetLe(h + 8, 8);
    const uint64_t record_bytes = GetLe(h + 16, 8);
    b.at = pos;
    pos += kBlockHeaderSize;
    if (b.partition >= partitions)
      return Status::Error(at + ": partition " + std::to_string(b.partition) + " of " +
                           std::to_string(partitions));
    if (record_bytes > bytes.size() - pos) return Status::Error(at + ": truncated records");
    // A record takes at least 10 bytes; its path shares at most kMaxPathBytes with the one
    // before, the rest of the path and any target travel in the record.
    if (record_bytes < uint64_t{b.count} * 10 ||
        b.string_bytes > record_bytes + uint64_t{b.count} * kMaxPathBytes)
      return Status::Error(at + ": counts do not match its length");
    b.records = bytes.substr(pos, record_bytes);
    pos += record_bytes;
    blocks.push_back(b);
  }
  std::stable_sort(
      blocks.begin(), blocks.end(),
      [](const ExchangeBlock& a, const ExchangeBlock& b) { return a.partition < b.partition; });
  return blocks;
}

bool BlockDecoder::Fail(const std::string& what) {
  status_ = Status::Error("namespace exchange: block at byte " + std::to_string(b_.at) +
                          " (partition " + std::to_string(b_.partition) + "), record " +
                          std::to_string(decoded_) + ": " + what);
  return false;
}

bool BlockDecoder::Next(IndexRecord* rec) {
  if (!status_.ok()) return false;
  const std::string_view in = b_.records;
  if (decoded_ == b_.count) {
    if (pos_ != in.size()) return Fail("bytes after the last record");
    if (out_ != b_.string_bytes) return Fail("path bytes do not match the header");
    return false;
  }
  auto varint = [&](uint64_t* v) {
    uint64_t x = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= in.size()) break;
      const uint8_t c = static_cast<uint8_t>(in[pos_++]);
      if (shift == 63 && c > 1) break;  // the tenth byte holds bit 63 only: more overflows
      x |= uint64_t{c & 0x7fu} << shift;
      if (!(c & 0x80)) {
        *v = x;
        return true;
      }
    }
    return false;
  };
  auto u32 = [&](uint32_t* v) {
    uint64_t x;
    if (!varint(&x)) return false;
    if (x > UINT32_MAX) return false;
    *v = static_cast<uint32_t>(x);
    return true;
  };
  if (pos_ >= in.size()) return Fail("truncated");
  const uint8_t head = static_cast<uint8_t>(in[pos_++]);
  IndexRecord r{};
  r.kind = head & 3;
  r.codec = (head >> 2) & 3;
  if (r.kind == 0 || (head & kReservedBit) || r.codec > kMaxCodec) return Fail("bad kind or codec");
  uint64_t shared, rest;
  if (!varint(&shared) || !varint(&rest)) return Fail("truncated path");
  if (shared > prev_len_) return Fail("path shares more bytes than the previous one has");
  if (rest > in.size() - pos_ || shared + rest > kMaxPathBytes) return Fail("bad path length");
  const uint64_t path_len = shared + rest;
  if (path_len > b_.string_bytes - out_) return Fail("more path bytes than the header says");
  char* path = dst_ + out_;
  if (shared) std::memmove(path, dst_ + prev_path_, shared);
  std::memcpy(path + shared, in.data() + pos_, rest);
  pos_ += rest;
  r.mode = prev_.mode;
  r.uid = prev_.uid;
  r.gid = prev_.gid;
  if (!(head & kModeSame) && !u32(&r.mode)) return Fail("bad mode");
  if (!(head & kOwnerSame) && (!u32(&r.uid) || !u32(&r.gid))) return Fail("bad owner");
  uint64_t delta_off, delta_mtime;
  if (!varint(&r.size)) return Fail("bad size");
  r.stored_size = r.size;
  if (!(head & kStoredIsSize) && !varint(&r.stored_size)) return Fail("bad stored size");
  if (!varint(&delta_off) || !varint(&delta_mtime)) return Fail("bad offset or time");
  r.data_offset = prev_.data_offset + static_cast<uint64_t>(UnZigZag(delta_off));
  r.mtime_ns = static_cast<int64_t>(static_cast<uint64_t>(prev_.mtime_ns) +
                                    static_cast<uint64_t>(UnZigZag(delta_mtime)));
  if (in.size() - pos_ < 4) return Fail("truncated checksum");
  r.crc32c = static_cast<uint32_t>(GetLe(in.data() + pos_, 4));
  pos_ += 4;
  const uint64_t target = r.kind == static_cast<uint8_t>(Kind::kSymlink) ? r.size : 0;
  if (target > in.size() - pos_ || target > b_.string_bytes - out_ - path_len)
    return Fail("truncated symlink target");
  std::memcpy(path + path_len, in.data() + pos_, target);
  pos_ += target;
  r.path_offset = out_;
  r.path_length = static_cast<uint32_t>(path_len);
  prev_path_ = out_;
  prev_len_ = static_cast<uint32_t>(path_len);
  out_ += path_len + target;
  prev_ = r;
  ++decoded_;
  *rec = r;
  return true;
}

}  // namespace fanstore::meta
