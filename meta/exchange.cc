#include "meta/exchange.h"

#include <cstring>

namespace fanstore::meta {

void EncodeMembers(const PartitionReader& reader, uint32_t id, std::string* out) {
  for (size_t i = 0; i < reader.size(); ++i) {
    const MemberView v = reader.member(i);
    IndexRecord rec = v.rec;
    rec.path_offset = id;
    uint8_t raw[IndexRecord::kSize];
    rec.EncodeTo(raw);
    out->append(reinterpret_cast<const char*>(raw), sizeof raw);
    out->append(v.path);
    out->append(v.target);
  }
}

void AppendMembers(const PartitionReader& reader, uint32_t id, std::vector<NsMember>* out) {
  for (size_t i = 0; i < reader.size(); ++i) {
    const MemberView v = reader.member(i);
    out->push_back(NsMember{v.path, v.target, v.rec, id});
  }
}

Result<std::vector<NsMember>> DecodeMembers(std::string_view bytes, uint32_t partitions) {
  std::vector<NsMember> out;
  out.reserve(bytes.size() / (IndexRecord::kSize + 16));
  size_t pos = 0;
  while (pos < bytes.size()) {
    if (bytes.size() - pos < IndexRecord::kSize)
      return Status::Error("namespace exchange: truncated record at byte " + std::to_string(pos));
    NsMember m;
    m.rec = IndexRecord::DecodeFrom(reinterpret_cast<const uint8_t*>(bytes.data() + pos));
    pos += IndexRecord::kSize;
    const uint64_t target_len = m.rec.kind == static_cast<uint8_t>(Kind::kSymlink) ? m.rec.size : 0;
    if (m.rec.kind == 0 || m.rec.kind > static_cast<uint8_t>(Kind::kSymlink) || m.rec.path_offset >= partitions ||
        m.rec.codec > static_cast<uint8_t>(Codec::kDeflate) ||
        bytes.size() - pos < uint64_t{m.rec.path_length} + target_len)
      return Status::Error("namespace exchange: damaged record at byte " +
                           std::to_string(pos - IndexRecord::kSize));
    m.partition = static_cast<uint32_t>(m.rec.path_offset);
    m.path = bytes.substr(pos, m.rec.path_length);
    pos += m.rec.path_length;
    m.target = bytes.substr(pos, target_len);
    pos += target_len;
    out.push_back(m);
  }
  return out;
}

}  // namespace fanstore::meta
