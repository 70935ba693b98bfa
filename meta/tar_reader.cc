// Tar: 512-byte headers, each followed by its data padded to 512. Formats read: POSIX
// ustar (name split into prefix and name), GNU (typeflag 'L'/'K' long names, base-256
// numbers, 'S' sparse members with extension headers) and PAX ('x' per member, 'g' for
// all that follow; path, linkpath, size, mtime, uid, gid, and GNU tar's sparse formats
// 0.1 and 1.0). A sparse member's holes are given back as zeros, as tar x writes them.
#include <algorithm>
#include <cstring>
#include <map>
#include <vector>

#include "meta/archive_reader.h"
#include "meta/tar_fields.h"

namespace fanstore::meta {
namespace {
using tar_fields::AllZero;
using tar_fields::ChecksumOk;
using tar_fields::Field;
using tar_fields::ParseDecimal;
using tar_fields::ParseNumber;
using tar_fields::ParsePaxTime;
using tar_fields::SecondsToNs;

constexpr size_t kBlock = 512;

struct Extent {
  uint64_t offset, length;
};

class TarReader final : public EntryReader {
 public:
  explicit TarReader(std::unique_ptr<ByteSource> in) : in_(std::move(in)) {}

  Result<bool> Next(ArchiveEntry* e) override {
    FANSTORE_RETURN_IF_ERROR(SkipRest());
    std::map<std::string, std::string> pax;
    std::string long_name, long_link;
    bool have_long_name = false, have_long_link = false;
    for (;;) {
      uint8_t h[kBlock];
      const uint64_t at = pos_;
      auto got = ReadUpTo(h, kBlock);
      if (!got.ok()) return got.status();
      if (at == 0 && *got < kBlock)
        return Bad(at, "is not a tar or zip archive (shorter than one tar header)");
      if (*got == 0) return false;  // end without the two zero blocks: as GNU tar, accept
      if (*got < kBlock) return Bad(at, "ends inside a header (truncated?)");
      if (AllZero(h, kBlock)) {
        // The end. Read what follows (blocking padding, and a compressed stream's
        // trailer), so that a decoder checks its checksum over the whole stream.
        FANSTORE_RETURN_IF_ERROR(DrainToEnd());
        return false;
      }
      if (!ChecksumOk(h))
        return Bad(at, at == 0 ? "is not a tar or zip archive (no tar header at its start)"
                               : "has a damaged header (checksum mismatch)");
      uint64_t size;
      if (!ParseNumber(h + 124, 12, &size)) return Bad(at, "has a header with a bad size field");
      const char type = static_cast<char>(h[156]);
      if (type == 'L' || type == 'K' || type == 'x' || type == 'g') {
        if (size > (16u << 20)) return Bad(at, "has an extended header over 16 MiB");
        std::string body(size, '\0');
        FANSTORE_RETURN_IF_ERROR(ReadExact(reinterpret_cast<uint8_t*>(body.data()), size));
        FANSTORE_RETURN_IF_ERROR(Pad(size));
        if (type == 'L' || type == 'K') {
          body.resize(std::strlen(body.c_str()));
          (type == 'L' ? long_name : long_link) = body;
          (type == 'L' ? have_long_name : have_long_link) = true;
        } else {
          auto& into = type == 'g' ? global_ : pax;
          if (!ParsePax(body, into)) return Bad(at, "has a damaged PAX header");
        }
        continue;
      }
      if (type == 'V') {  // volume label
        FANSTORE_RETURN_IF_ERROR(SkipData(size));
        continue;
      }
      if (type == 'M') return Bad(at, "is a multi-volume archive (continued from another)");

      ArchiveEntry x;
      x.offset = at;
      const bool ustar = std::memcmp(h + 257, "ustar", 5) == 0;
      const bool gnu = std::memcmp(h + 257, "ustar  ", 8) == 0;
      x.path = Field(h, 100);
      if (ustar && !gnu && h[345]) x.path = Field(h + 345, 155) + "/" + x.path;
      if (have_long_name) x.path = long_name;
      x.link = have_long_link ? long_link : Field(h + 157, 100);
      uint64_t v;
      bool neg = false;
      if (!ParseNumber(h + 100, 8, &v)) return Bad(at, "has a bad mode field");
      x.mode = static_cast<uint32_t>(v & 07777);
      if (!ParseNumber(h + 108, 8, &v)) return Bad(at, "has a bad uid field");
      x.uid = static_cast<uint32_t>(v);
      if (!ParseNumber(h + 116, 8, &v)) return Bad(at, "has a bad gid field");
      x.gid = static_cast<uint32_t>(v);
      if (!ParseNumber(h + 136, 12, &v, &neg) || v > INT64_MAX ||
          !SecondsToNs(neg ? -static_cast<int64_t>(v) : static_cast<int64_t>(v), 0, &x.mtime_ns))
        return Bad(at, "has a bad mtime field (not a number, or beyond the years 1678-2262)");
      x.size = size;

      std::map<std::string, std::string> attrs = global_;
      for (auto& [k, val] : pax) attrs[k] = val;
      if (auto it = attrs.find("path"); it != attrs.end() && !have_long_name) x.path = it->second;
      if (auto it = attrs.find("linkpath"); it != attrs.end() && !have_long_link)
        x.link = it->second;
      if (auto it = attrs.find("size"); it != attrs.end() && !ParseDecimal(it->second, &x.size))
        return Bad(at, "has a bad PAX size");
      if (auto it = attrs.find("uid"); it != attrs.end()) {
        if (!ParseDecimal(it->second, &v)) return Bad(at, "has a bad PAX uid");
        x.uid = static_cast<uint32_t>(v);
      }
      if (auto it = attrs.find("gid"); it != attrs.end()) {
        if (!ParseDecimal(it->second, &v)) return Bad(at, "has a bad PAX gid");
        x.gid = static_cast<uint32_t>(v);
      }
      if (auto it = attrs.find("mtime");
          it != attrs.end() && !ParsePaxTime(it->second, &x.mtime_ns))
        return Bad(at, "has a bad PAX mtime (not a number, or beyond the years 1678-2262)");

      stored_ = stored_total_ = x.size;  // bytes of data that follow the header(s)
      // (a plain tar file cannot hold more than its own length: refused before anything of
      // the member is written, not once it has filled the output's disk)
      if (x.size > in_->bytes_left())
        return Bad(at, "declares " + std::to_string(x.size) + " bytes of data for '" + x.path +
                           "', more than the " + std::to_string(in_->bytes_left()) +
                           " bytes left in the archive");
      in_entry_ = true;
      extents_.clear();
      sparse_ = false;
      switch (type) {
        case '0':
        case '\0':
        case '7':
          x.type = ArchiveEntry::kFile;
          break;
        case '1':
          x.type = ArchiveEntry::kHardlink;
          break;
        case '2':
          x.type = ArchiveEntry::kSymlink;
          break;
        case '5':
          x.type = ArchiveEntry::kDir;
          break;
        case '3':
        case '4':
        case '6':
          x.type = ArchiveEntry::kSpecial;
          break;
        case 'S':
          x.type = ArchiveEntry::kFile;
          FANSTORE_RETURN_IF_ERROR(ReadGnuSparse(h, &x));
          break;
        default:
          // POSIX: unknown types are read as regular files.
          x.type = ArchiveEntry::kFile;
          break;
      }
      if (x.type == ArchiveEntry::kFile && type != 'S')
        FANSTORE_RETURN_IF_ERROR(PaxSparse(attrs, &x));
      if (x.type == ArchiveEntry::kFile && x.path.size() > 0 && x.path.back() == '/')
        x.type = ArchiveEntry::kDir;  // old tars mark directories by the trailing slash only
      if (x.type != ArchiveEntry::kFile) {
        // Links, directories and devices carry no data of their own (a hard link's size
        // field is ignored, as GNU tar does); skip whatever the header says follows.
        FANSTORE_RETURN_IF_ERROR(SkipData(stored_));
        stored_ = 0;
        in_entry_ = false;
        x.size = x.type == ArchiveEntry::kSymlink ? x.link.size() : 0;
      }
      if (!sparse_) extents_.push_back({0, x.size});
      logical_ = 0;
      size_ = x.size;
      next_extent_ = 0;
      *e = std::move(x);
      return true;
    }
  }

  Result<size_t> ReadData(uint8_t* p, size_t n) override {
    if (logical_ >= size_ || n == 0) return size_t{0};
    // Skip extents already passed; in a hole, give zeros up to the next extent.
    while (next_extent_ < extents_.size() &&
           extents_[next_extent_].offset + extents_[next_extent_].length <= logical_)
      ++next_extent_;
    const uint64_t hole_end =
        next_extent_ < extents_.size() ? std::min(extents_[next_extent_].offset, size_) : size_;
    if (logical_ < hole_end) {
      const size_t k = static_cast<size_t>(std::min<uint64_t>(n, hole_end - logical_));
      std::memset(p, 0, k);
      logical_ += k;
      return k;
    }
    const Extent& x = extents_[next_extent_];
    const uint64_t left = std::min(x.offset + x.length, size_) - logical_;
    const size_t k = static_cast<size_t>(std::min<uint64_t>({n, left, stored_}));
    if (k == 0) return Bad(pos_, "has a sparse map that runs past its data");
    FANSTORE_RETURN_IF_ERROR(ReadExact(p, k));
    stored_ -= k;
    logical_ += k;
    return k;
  }

  uint64_t file_offset() const override { return in_->file_offset(); }
  const std::string& name() const override { return in_->name(); }

 private:
  Status Bad(uint64_t at, const std::string& what) const {
    return Status::Error(name() + ": " + what + " (at byte " + std::to_string(at) +
                         " of the tar stream)");
  }

  Result<size_t> ReadUpTo(uint8_t* p, size_t n) {
    size_t got = 0;
    while (got < n) {
      auto r = in_->Read(p + got, n - got);
      if (!r.ok()) return r.status();
      if (*r == 0) break;
      got += *r;
    }
    pos_ += got;
    return got;
  }
  Status ReadExact(uint8_t* p, size_t n) {
    auto r = ReadUpTo(p, n);
    if (!r.ok()) return r.status();
    if (*r < n) return Bad(pos_, "ends inside a member's data (truncated?)");
    return Status::Ok();
  }
  Status Discard(uint64_t n) {
    uint8_t scratch[64 << 10];
    while (n > 0) {
      const size_t k = static_cast<size_t>(std::min<uint64_t>(n, sizeof scratch));
      FANSTORE_RETURN_IF_ERROR(ReadExact(scratch, k));
      n -= k;
    }
    return Status::Ok();
  }
  Status DrainToEnd() {
    uint8_t scratch[64 << 10];
    for (;;) {
      auto r = ReadUpTo(scratch, sizeof scratch);
      if (!r.ok()) return r.status();
      if (*r < sizeof scratch) return Status::Ok();
    }
  }
  Status Pad(uint64_t size) { return Discard((kBlock - size % kBlock) % kBlock); }
  Status SkipData(uint64_t size) {
    FANSTORE_RETURN_IF_ERROR(Discard(size));
    return Pad(size);
  }
  // Drops the unread data of the current entry and its padding; called by Next.
  Status SkipRest() {
    const uint64_t total = stored_total_;
    FANSTORE_RETURN_IF_ERROR(Discard(stored_));
    stored_ = 0;
    if (in_entry_) FANSTORE_RETURN_IF_ERROR(Pad(total));
    in_entry_ = false;
    return Status::Ok();
  }

  static bool ParsePax(const std::string& body, std::map<std::string, std::string>& out) {
    size_t i = 0;
    while (i < body.size()) {
      if (body[i] == '\0') break;  // padding some writers leave
      const size_t sp = body.find(' ', i);
      if (sp == std::string::npos) return false;
      uint64_t len;
      if (!ParseDecimal(body.substr(i, sp - i), &len) || len < sp - i + 3 || i + len > body.size())
        return false;
      const std::string rec = body.substr(sp + 1, i + len - sp - 2);
      if (body[i + len - 1] != '\n') return false;
      const size_t eq = rec.find('=');
      if (eq == std::string::npos) return false;
      out[rec.substr(0, eq)] = rec.substr(eq + 1);
      i += len;
    }
    return true;
  }

  // GNU 'S': up to 4 (offset, length) pairs in the header, more in extension headers.
  Status ReadGnuSparse(const uint8_t* h, ArchiveEntry* x) {
    auto add = [&](const uint8_t* p, int count) -> Status {
      for (int i = 0; i < count; ++i) {
        uint64_t off, len;
        if (!ParseNumber(p + 24 * i, 12, &off) || !ParseNumber(p + 24 * i + 12, 12, &len))
          return Bad(x->offset, "has a bad sparse map");
        if (off == 0 && len == 0 && p[24 * i] == 0) continue;
        extents_.push_back({off, len});
      }
      return Status::Ok();
    };
    FANSTORE_RETURN_IF_ERROR(add(h + 386, 4));
    bool more = h[482] != 0;
    while (more) {
      uint8_t ext[kBlock];
      FANSTORE_RETURN_IF_ERROR(ReadExact(ext, kBlock));
      FANSTORE_RETURN_IF_ERROR(add(ext, 21));
      more = ext[504] != 0;
    }
    uint64_t real;
    if (!ParseNumber(h + 483, 12, &real)) return Bad(x->offset, "has a bad sparse size");
    return FinishSparse(x, real);
  }

  // PAX sparse members (GNU tar --sparse --format=posix): 0.1 keeps the map in the
  // GNU.sparse.map attribute, 1.0 at the start of the data, as decimal lines.
  Status PaxSparse(const std::map<std::string, std::string>& a, ArchiveEntry* x) {
    auto get = [&](const char* k) -> const std::string* {
      auto it = a.find(k);
      return it == a.end() ? nullptr : &it->second;
    };
    const std::string* major = get("GNU.sparse.major");
    const std::string* map = get("GNU.sparse.map");
    if (!major && !map) return Status::Ok();
    if (const std::string* n = get("GNU.sparse.name")) x->path = *n;
    uint64_t real = 0;
    const std::string* rs = get("GNU.sparse.realsize");
    if (!rs) rs = get("GNU.sparse.size");
    if (!rs || !ParseDecimal(*rs, &real))
      return Bad(x->offset, "has a sparse member without its size");
    if (major && *major == "1") {
      // The map: count, then offset and length lines, padded to a block.
      std::string text;
      uint64_t used = 0;
      auto line = [&](uint64_t* v) -> Status {
        std::string s;
        for (;;) {
          if (used >= text.size()) {
            uint8_t b[kBlock];
            if (stored_ < kBlock) return Bad(x->offset, "has a damaged sparse map");
            FANSTORE_RETURN_IF_ERROR(ReadExact(b, kBlock));
            stored_ -= kBlock;
            text.append(reinterpret_cast<char*>(b), kBlock);
          }
          const char c = text[used++];
          if (c == '\n') break;
          s += c;
          if (s.size() > 20) return Bad(x->offset, "has a damaged sparse map");
        }
        if (!ParseDecimal(s, v)) return Bad(x->offset, "has a damaged sparse map");
        return Status::Ok();
      };
      uint64_t count;
      FANSTORE_RETURN_IF_ERROR(line(&count));
      if (count > (1u << 24)) return Bad(x->offset, "has a sparse map too large");
      for (uint64_t i = 0; i < count; ++i) {
        uint64_t off, len;
        FANSTORE_RETURN_IF_ERROR(line(&off));
        FANSTORE_RETURN_IF_ERROR(line(&len));
        extents_.push_back({off, len});
      }
    } else if (map) {
      std::vector<uint64_t> nums;
      size_t i = 0;
      while (i <= map->size() && !map->empty()) {
        size_t j = map->find(',', i);
        if (j == std::string::npos) j = map->size();
        uint64_t v;
        if (!ParseDecimal(map->substr(i, j - i), &v)) return Bad(x->offset, "has a bad sparse map");
        nums.push_back(v);
        i = j + 1;
      }
      if (nums.size() % 2) return Bad(x->offset, "has a bad sparse map");
      for (size_t k = 0; k < nums.size(); k += 2) extents_.push_back({nums[k], nums[k + 1]});
    } else {
      return Bad(x->offset, "has a sparse member in a format not read (GNU sparse 0.0)");
    }
    return FinishSparse(x, real);
  }

  Status FinishSparse(ArchiveEntry* x, uint64_t real) {
    uint64_t end = 0, data = 0;
    for (const Extent& e : extents_) {
      if (e.offset < end || e.length > real || e.offset > real - e.length)
        return Bad(x->offset, "has a sparse map out of order or past its size");
      end = e.offset + e.length;
      data += e.length;
    }
    if (data > stored_) return Bad(x->offset, "has a sparse map larger than its data");
    sparse_ = true;
    x->size = real;
    return Status::Ok();
  }

  std::unique_ptr<ByteSource> in_;
  uint64_t pos_ = 0;           // bytes of the tar stream consumed
  uint64_t stored_ = 0;        // data bytes of the current entry not yet read
  uint64_t stored_total_ = 0;  // data bytes of the current entry, for its padding
  bool in_entry_ = false;
  std::map<std::string, std::string> global_;
  std::vector<Extent> extents_;
  bool sparse_ = false;
  size_t next_extent_ = 0;
  uint64_t logical_ = 0, size_ = 0;
};

class EntrySource final : public ByteSource {
 public:
  EntrySource(EntryReader& outer, std::string name) : outer_(outer), name_(std::move(name)) {}
  Result<size_t> Read(uint8_t* p, size_t n) override { return outer_.ReadData(p, n); }
  uint64_t file_offset() const override { return outer_.file_offset(); }
  const std::string& name() const override { return name_; }

 private:
  EntryReader& outer_;
  std::string name_;
};

}  // namespace

std::unique_ptr<EntryReader> NewTarReader(std::unique_ptr<ByteSource> in) {
  return std::make_unique<TarReader>(std::move(in));
}

std::unique_ptr<ByteSource> EntryDataSource(EntryReader& outer, const std::string& path) {
  return std::make_unique<EntrySource>(outer, outer.name() + ":" + path);
}

}  // namespace fanstore::meta
