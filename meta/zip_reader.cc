// Zip: the central directory at the end lists every entry (zip64 records for archives and
// members over 4 GiB); each entry's data follows its local header. Read: stored and
// deflated members (deflate through ISA-L), checked against their CRC-32 and sizes; Unix
// modes and file types when the archive was made on Unix, the extended timestamp (UTC)
// when present, else the DOS time read as local time, as unzip does. Encrypted members and
// other methods are refused with the entry's name.
#include <fcntl.h>
#include <isa-l/crc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <vector>

#include "compress/inflate.h"
#include "meta/archive_reader.h"

namespace fanstore::meta {
namespace {

struct ZipEntry {
  std::string name;
  uint16_t made_by = 0, flags = 0, method = 0, dos_time = 0, dos_date = 0;
  uint32_t crc = 0, ext_attr = 0;
  uint64_t csize = 0, usize = 0, local = 0;
  bool has_utime = false;
  int64_t utime = 0;
};

uint16_t U16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | p[1] << 8);
}
uint32_t U32(const uint8_t* p) {
  return U16(p) | static_cast<uint32_t>(U16(p + 2)) << 16;
}
uint64_t U64(const uint8_t* p) {
  return U32(p) | static_cast<uint64_t>(U32(p + 4)) << 32;
}

int64_t DosTime(uint16_t date, uint16_t time) {
  struct tm t {};
  t.tm_year = ((date >> 9) & 0x7f) + 80;
  t.tm_mon = ((date >> 5) & 0xf) - 1;
  t.tm_mday = date & 0x1f;
  t.tm_hour = (time >> 11) & 0x1f;
  t.tm_min = (time >> 5) & 0x3f;
  t.tm_sec = (time & 0x1f) * 2;
  t.tm_isdst = -1;
  return static_cast<int64_t>(std::mktime(&t));
}

class ZipReader final : public EntryReader {
 public:
  ZipReader(int fd, std::string name) : fd_(fd), name_(std::move(name)), buf_(256 << 10) {}
  ~ZipReader() override { ::close(fd_); }

  Status Load() {
    struct stat st;
    if (::fstat(fd_, &st) != 0) return Status::FromErrno(name_, errno);
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    size_ = size;
    // The end record is in the last 22 + 65535 bytes (its comment may be that long).
    const uint64_t tail = std::min<uint64_t>(size, 22 + 65535 + 20);
    std::vector<uint8_t> t(tail);
    FANSTORE_RETURN_IF_ERROR(PreadExact(t.data(), tail, size - tail, "its end record"));
    size_t eocd = SIZE_MAX;
    for (size_t i = tail >= 22 ? tail - 22 + 1 : 0; i-- > 0;)
      if (U32(&t[i]) == 0x06054b50 && i + 22 + U16(&t[i + 20]) <= tail) {
        eocd = i;
        break;
      }
    if (eocd == SIZE_MAX)
      return Bad(size, "has no end-of-central-directory record (not a zip, or truncated)");
    uint64_t count = U16(&t[eocd + 10]), cd_size = U32(&t[eocd + 12]), cd_off = U32(&t[eocd + 16]);
    if (eocd >= 20 && U32(&t[eocd - 20]) == 0x07064b50) {
      const uint64_t z64 = U64(&t[eocd - 20 + 8]);
      uint8_t r[56];
      FANSTORE_RETURN_IF_ERROR(PreadExact(r, sizeof r, z64, "its zip64 end record"));
      if (U32(r) != 0x06064b50) return Bad(z64, "has a damaged zip64 end record");
      count = U64(r + 32);
      cd_size = U64(r + 40);
      cd_off = U64(r + 48);
    }
    if (cd_off > size || cd_size > size - cd_off)
      return Bad(cd_off, "has a central directory past its end (truncated?)");
    if (cd_size > (1ull << 32)) return Bad(cd_off, "has a central directory over 4 GiB");
    std::vector<uint8_t> cd(cd_size);
    FANSTORE_RETURN_IF_ERROR(PreadExact(cd.data(), cd_size, cd_off, "its central directory"));
    size_t at = 0;
    for (uint64_t i = 0; i < count; ++i) {
      if (at + 46 > cd.size() || U32(&cd[at]) != 0x02014b50)
        return Bad(cd_off + at, "has a damaged central directory");
      const uint8_t* h = &cd[at];
      ZipEntry e;
      e.made_by = U16(h + 4);
      e.flags = U16(h + 8);
      e.method = U16(h + 10);
      e.dos_time = U16(h + 12);
      e.dos_date = U16(h + 14);
      e.crc = U32(h + 16);
      e.csize = U32(h + 20);
      e.usize = U32(h + 24);
      const size_t n = U16(h + 28), m = U16(h + 30), k = U16(h + 32);
      e.ext_attr = U32(h + 38);
      e.local = U32(h + 42);
      if (at + 46 + n + m + k > cd.size())
        return Bad(cd_off + at, "has a damaged central directory");
      e.name.assign(reinterpret_cast<const char*>(h + 46), n);
      for (size_t x = 46 + n; x + 4 <= 46 + n + m;) {
        const uint16_t id = U16(h + x), len = U16(h + x + 2);
        const uint8_t* d = h + x + 4;
        if (x + 4 + len > 46 + n + m) break;
        if (id == 0x0001) {  // zip64: the fields that overflowed, in this order
          size_t o = 0;
          auto take = [&](uint64_t& f) {
            if (f == 0xFFFFFFFFu && o + 8 <= len) f = U64(d + o), o += 8;
          };
          take(e.usize);
          take(e.csize);
          take(e.local);
        } else if (id == 0x5455 && len >= 5 && (d[0] & 1)) {
          e.has_utime = true;
          e.utime = static_cast<int32_t>(U32(d + 1));
        }
        x += 4 + len;
      }
      entries_.push_back(std::move(e));
      at += 46 + n + m + k;
    }
    std::stable_sort(entries_.begin(), entries_.end(),
                     [](const ZipEntry& a, const ZipEntry& b) { return a.local < b.local; });
    return Status::Ok();
  }

  Result<bool> Next(ArchiveEntry* out) override {
    if (next_ >= entries_.size()) return false;
    const ZipEntry& e = entries_[next_++];
    cur_ = &e;
    uint8_t lh[30];
    FANSTORE_RETURN_IF_ERROR(PreadExact(lh, sizeof lh, e.local, "a local header"));
    if (U32(lh) != 0x04034b50)
      return Bad(e.local, "has a damaged local header for '" + e.name + "'");
    data_ = e.local + 30 + U16(lh + 26) + U16(lh + 28);
    if (data_ > size_ || e.csize > size_ - data_)
      return Bad(e.local, "has the data of '" + e.name + "' past its end (truncated?)");
    ArchiveEntry x;
    x.path = e.name;
    x.offset = e.local;
    x.has_owner = false;
    x.mtime_ns = (e.has_utime ? e.utime : DosTime(e.dos_date, e.dos_time)) * 1'000'000'000;
    const bool unix_made = (e.made_by >> 8) == 3 && (e.ext_attr >> 16) != 0;
    const uint32_t mode = e.ext_attr >> 16;
    const bool dir = unix_made ? S_ISDIR(mode) : (!e.name.empty() && e.name.back() == '/');
    x.type = dir                           ? ArchiveEntry::kDir
             : unix_made && S_ISLNK(mode)  ? ArchiveEntry::kSymlink
             : unix_made && !S_ISREG(mode) ? ArchiveEntry::kSpecial
                                           : ArchiveEntry::kFile;
    x.mode = unix_made ? (mode & 07777) : (dir ? 0755 : 0644);
    x.size = dir ? 0 : e.usize;
    if (!dir && (e.flags & 1))
      return Bad(e.local, "has '" + e.name + "' encrypted (not supported)");
    if (!dir && e.method != 0 && e.method != 8)
      return Bad(e.local, "has '" + e.name + "' compressed with method " +
                              std::to_string(e.method) + " (only stored and deflated are read)");
    read_ = 0;
    cread_ = 0;
    crc_ = 0;
    in_pos_ = in_len_ = 0;
    inflater_.Reset();
    if (x.type == ArchiveEntry::kSymlink) {
      if (e.usize > 65535)
        return Bad(e.local, "has a symlink '" + e.name + "' with a target over 64 KiB");
      std::string target(e.usize, '\0');
      size_t got = 0;
      while (got < target.size()) {
        auto r = ReadData(reinterpret_cast<uint8_t*>(target.data()) + got, target.size() - got);
        if (!r.ok()) return r.status();
        if (*r == 0) break;
        got += *r;
      }
      x.link = target;
    }
    *out = std::move(x);
    return true;
  }

  Result<size_t> ReadData(uint8_t* p, size_t n) override {
    const ZipEntry& e = *cur_;
    if (read_ >= e.usize || n == 0) return size_t{0};
    n = static_cast<size_t>(std::min<uint64_t>(n, e.usize - read_));
    size_t got = 0;
    if (e.method == 0) {
      if (e.csize != e.usize) return Bad(e.local, "has stored '" + e.name + "' with two sizes");
      FANSTORE_RETURN_IF_ERROR(PreadExact(p, n, data_ + read_, "a member's data"));
      got = n;
    } else {
      while (got == 0) {
        if (in_pos_ == in_len_) {
          const uint64_t left = e.csize - cread_;
          if (left == 0) return Bad(e.local, "has '" + e.name + "' shorter than its size says");
          in_len_ = static_cast<size_t>(std::min<uint64_t>(left, buf_.size()));
          FANSTORE_RETURN_IF_ERROR(
              PreadExact(buf_.data(), in_len_, data_ + cread_, "a member's data"));
          cread_ += in_len_;
          in_pos_ = 0;
        }
        size_t c = 0, made = 0;
        const int rc =
            inflater_.Step({buf_.data() + in_pos_, in_len_ - in_pos_}, {p, n}, &c, &made);
        in_pos_ += c;
        got = made;
        if (rc < 0) return Bad(data_ + cread_, "has '" + e.name + "' damaged (bad deflate data)");
        if (rc == 1 && got == 0)
          return Bad(e.local, "has '" + e.name + "' shorter than its size says");
      }
    }
    crc_ = crc32_gzip_refl(crc_, p, got);
    read_ += got;
    offset_ = std::max(offset_, data_ + (e.method == 0 ? read_ : cread_));
    if (read_ == e.usize && crc_ != e.crc)
      return Bad(e.local, "has '" + e.name + "' damaged (CRC-32 mismatch)");
    return got;
  }

  uint64_t file_offset() const override { return offset_; }
  const std::string& name() const override { return name_; }

 private:
  Status Bad(uint64_t at, const std::string& what) const {
    return Status::Error(name_ + ": " + what + " (at byte " + std::to_string(at) + ")");
  }
  Status PreadExact(uint8_t* p, size_t n, uint64_t off, const char* what) {
    size_t got = 0;
    while (got < n) {
      const ssize_t r = ::pread(fd_, p + got, n - got, static_cast<off_t>(off + got));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return Status::FromErrno(name_, errno);
      if (r == 0) return Bad(off + got, std::string("ends early in ") + what + " (truncated?)");
      got += static_cast<size_t>(r);
    }
    return Status::Ok();
  }

  int fd_;
  std::string name_;
  std::vector<uint8_t> buf_;
  std::vector<ZipEntry> entries_;
  size_t next_ = 0;
  const ZipEntry* cur_ = nullptr;
  uint64_t size_ = 0, data_ = 0, read_ = 0, cread_ = 0, offset_ = 0;
  size_t in_pos_ = 0, in_len_ = 0;
  uint32_t crc_ = 0;
  compress::Inflater inflater_;
};

}  // namespace

bool LooksLikeZip(const uint8_t* p, size_t n) {
  return n >= 4 && p[0] == 'P' && p[1] == 'K' &&
         ((p[2] == 3 && p[3] == 4) || (p[2] == 5 && p[3] == 6));
}

Result<std::unique_ptr<EntryReader>> OpenZipReader(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(path, errno);
  auto r = std::make_unique<ZipReader>(fd, path);
  FANSTORE_RETURN_IF_ERROR(r->Load());
  return std::unique_ptr<EntryReader>(std::move(r));
}

}  // namespace fanstore::meta
