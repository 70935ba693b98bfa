#include "meta/manifest.h"

#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "compress/crc32c.h"
#include "meta/format.h"

namespace fanstore::meta {
namespace {

constexpr const char* kFirstLine = "fanstore-manifest 1";

bool ParseU64(const std::string& s, uint64_t* v, int base = 10) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  *v = std::strtoull(s.c_str(), &end, base);
  return errno == 0 && *end == '\0' && s[0] != '-';
}

}  // namespace

std::string EscapeField(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c <= 0x20 || c == '%' || c >= 0x7f) {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

Result<std::string> UnescapeField(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return Status::Error("bad escape");
    unsigned v = 0;
    if (std::sscanf(std::string(s.substr(i + 1, 2)).c_str(), "%2x", &v) != 1)
      return Status::Error("bad escape");
    out += static_cast<char>(v);
    i += 2;
  }
  return out;
}

std::string Manifest::Encode() const {
  std::ostringstream o;
  char id[32];
  std::snprintf(id, sizeof id, "%016" PRIx64, dataset_id);
  o << kFirstLine << "\n"
    << "dataset_id " << id << "\n"
    << "source " << EscapeField(source) << "\n"
    << "compress " << EscapeField(compress) << "\n"
    << "files " << files << "\n"
    << "dirs " << dirs << "\n"
    << "symlinks " << symlinks << "\n"
    << "bytes " << bytes << "\n"
    << "stored " << stored << "\n"
    << "partitions " << partitions.size() << "\n";
  for (const PartitionSummary& p : partitions) {
    char crc[16];
    std::snprintf(crc, sizeof crc, "%08x", p.index_crc);
    o << "partition " << p.id << " " << PartitionFileName(p.id) << " flags=" << p.flags
      << " members=" << p.members << " bytes=" << p.bytes << " stored=" << p.stored
      << " size=" << p.file_size << " index_crc=" << crc << "\n";
  }
  std::string body = o.str();
  char end[32];
  std::snprintf(end, sizeof end, "end %08x\n", compress::Crc32c(0, body.data(), body.size()));
  return body + end;
}

Result<Manifest> Manifest::Decode(const std::string& text) {
  auto bad = [](const std::string& why) { return Status::Error("manifest: " + why); };
  const size_t end_at = text.rfind("end ");
  if (text.rfind(kFirstLine, 0) != 0) {
    if (text.rfind("fanstore-manifest ", 0) == 0) return bad("unsupported format version");
    return bad("not a FanStore manifest (bad magic line)");
  }
  if (end_at == std::string::npos || (end_at > 0 && text[end_at - 1] != '\n'))
    return bad("truncated (no end line)");
  uint64_t crc = 0;
  std::string crc_field = text.substr(end_at + 4);
  if (!crc_field.empty() && crc_field.back() == '\n') crc_field.pop_back();
  if (!ParseU64(crc_field, &crc, 16)) return bad("malformed end line");
  if (compress::Crc32c(0, text.data(), end_at) != crc) return bad("checksum mismatch (damaged)");

  Manifest m;
  std::istringstream in(text.substr(0, end_at));
  std::string line;
  std::getline(in, line);  // first line, checked above
  uint64_t nparts = 0;
  bool have_parts = false;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string key, val;
    ls >> key >> val;
    auto num = [&](uint64_t* v) { return ParseU64(val, v) ? Status::Ok() : bad("bad " + key); };
    if (key == "dataset_id") {
      if (!ParseU64(val, &m.dataset_id, 16)) return bad("bad dataset_id");
    } else if (key == "source" || key == "compress") {
      auto v = UnescapeField(val);
      if (!v.ok()) return bad("bad " + key);
      (key == "source" ? m.source : m.compress) = *v;
    } else if (key == "files") {
      FANSTORE_RETURN_IF_ERROR(num(&m.files));
    } else if (key == "dirs") {
      FANSTORE_RETURN_IF_ERROR(num(&m.dirs));
    } else if (key == "symlinks") {
      FANSTORE_RETURN_IF_ERROR(num(&m.symlinks));
    } else if (key == "bytes") {
      FANSTORE_RETURN_IF_ERROR(num(&m.bytes));
    } else if (key == "stored") {
      FANSTORE_RETURN_IF_ERROR(num(&m.stored));
    } else if (key == "partitions") {
      FANSTORE_RETURN_IF_ERROR(num(&nparts));
      if (nparts == 0 || nparts > kMaxPartitions) return bad("bad partition count");
      have_parts = true;
    } else if (key == "partition") {
      PartitionSummary p;
      uint64_t id = 0;
      if (!ParseU64(val, &id) || id != m.partitions.size())
        return bad("partition lines out of order");
      p.id = static_cast<uint32_t>(id);
      std::string file, kv;
      ls >> file;
      if (file != PartitionFileName(p.id)) return bad("unexpected partition file name " + file);
      int seen = 0;
      while (ls >> kv) {
        const size_t eq = kv.find('=');
        if (eq == std::string::npos) return bad("malformed partition line");
        const std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
        uint64_t x = 0;
        if (!ParseU64(v, &x, k == "index_crc" ? 16 : 10)) return bad("bad partition field " + k);
        if (k == "flags")
          p.flags = static_cast<uint32_t>(x);
        else if (k == "members")
          p.members = x;
        else if (k == "bytes")
          p.bytes = x;
        else if (k == "stored")
          p.stored = x;
        else if (k == "size")
          p.file_size = x;
        else if (k == "index_crc")
          p.index_crc = static_cast<uint32_t>(x);
        else
          return bad("unknown partition field " + k);
        ++seen;
      }
      if (seen != 6) return bad("incomplete partition line");
      m.partitions.push_back(p);
    } else {
      return bad("unknown key '" + key + "'");
    }
  }
  if (!have_parts || m.partitions.size() != nparts) return bad("partition list incomplete");
  // The totals must follow from the partitions (whose counts are checked against their own
  // headers when opened): sizes derived from a forged total (a node cache for 4 billion
  // files) are then bounded by what the partitions really hold.
  uint64_t members = 0, bytes = 0, stored = 0;
  for (const PartitionSummary& p : m.partitions) {
    if (__builtin_add_overflow(members, p.members, &members) ||
        __builtin_add_overflow(bytes, p.bytes, &bytes) ||
        __builtin_add_overflow(stored, p.stored, &stored))
      return bad("partition totals overflow");
  }
  uint64_t entries = 0;
  if (__builtin_add_overflow(m.files, m.dirs, &entries) ||
      __builtin_add_overflow(entries, m.symlinks, &entries) || entries == 0 || entries > members)
    return bad("files, dirs and symlinks do not fit the partitions' " + std::to_string(members) +
               " members");
  if (m.bytes != bytes || m.stored != stored)
    return bad("bytes or stored differ from the partitions' sums");
  return m;
}

Result<Manifest> Manifest::Load(const std::string& dataset_dir) {
  const std::string file = dataset_dir + "/" + kManifestName;
  std::ifstream f(file, std::ios::binary);
  if (!f) {
    const int err = errno ? errno : ENOENT;
    // A directory with neither a manifest nor a first partition is not a packed dataset at
    // all (the usual slip: --data given the source tree); one with partitions has lost its
    // manifest, and the plain error names the file.
    std::error_code ec;
    if (err == ENOENT && !std::filesystem::exists(dataset_dir + "/" + PartitionFileName(0), ec))
      return Status::Error(dataset_dir + ": not a packed dataset (no " + kManifestName +
                           "; `fanstore pack SRC OUT` makes one)");
    return Status::FromErrno(file, err);
  }
  std::ostringstream ss;
  ss << f.rdbuf();
  if (ss.str().size() > (64u << 20)) return Status::Error(file + ": implausibly large");
  auto m = Decode(ss.str());
  if (!m.ok()) return Status::Error(dataset_dir + "/" + m.status().message());
  return m;
}

}  // namespace fanstore::meta
