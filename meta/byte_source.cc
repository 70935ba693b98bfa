#include "meta/byte_source.h"

#include <fcntl.h>
#include <isa-l/igzip_lib.h>
#include <lzma.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace fanstore::meta {
namespace {

constexpr size_t kInBuf = 256 << 10;

class FileSource final : public ByteSource {
 public:
  FileSource(int fd, std::string name) : fd_(fd), name_(std::move(name)) {
    struct stat st;
    if (::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode)) size_ = static_cast<uint64_t>(st.st_size);
  }
  ~FileSource() override { ::close(fd_); }
  Result<size_t> Read(uint8_t* p, size_t n) override {
    for (;;) {
      const ssize_t r = ::read(fd_, p, n);
      if (r >= 0) {
        offset_ += static_cast<uint64_t>(r);
        return static_cast<size_t>(r);
      }
      if (errno != EINTR) return Status::FromErrno(name_, errno);
    }
  }
  uint64_t file_offset() const override { return offset_; }
  const std::string& name() const override { return name_; }
  uint64_t bytes_left() const override {
    return size_ == UINT64_MAX ? size_ : size_ - std::min(offset_, size_);
  }

 private:
  int fd_;
  std::string name_;
  uint64_t offset_ = 0;
  uint64_t size_ = UINT64_MAX;  // a regular file's size, as opened
};

// Replays bytes peeked from `in` before reading on.
class ReplaySource final : public ByteSource {
 public:
  ReplaySource(std::unique_ptr<ByteSource> in, std::vector<uint8_t> head)
      : in_(std::move(in)), head_(std::move(head)) {}
  Result<size_t> Read(uint8_t* p, size_t n) override {
    if (at_ < head_.size()) {
      const size_t k = std::min(n, head_.size() - at_);
      std::memcpy(p, head_.data() + at_, k);
      at_ += k;
      return k;
    }
    return in_->Read(p, n);
  }
  uint64_t file_offset() const override { return in_->file_offset(); }
  const std::string& name() const override { return in_->name(); }
  uint64_t bytes_left() const override {
    const uint64_t rest = in_->bytes_left(), head = head_.size() - at_;
    return rest > UINT64_MAX - head ? UINT64_MAX : rest + head;
  }

 private:
  std::unique_ptr<ByteSource> in_;
  std::vector<uint8_t> head_;
  size_t at_ = 0;
};

// Common shape of the decoders: an input buffer refilled from `in_`.
class DecoderBase : public ByteSource {
 public:
  explicit DecoderBase(std::unique_ptr<ByteSource> in) : in_(std::move(in)), buf_(kInBuf) {}
  uint64_t file_offset() const override { return in_->file_offset(); }
  const std::string& name() const override { return in_->name(); }

 protected:
  // Refills when empty; false at the end of the input.
  Result<bool> Fill() {
    if (pos_ < len_) return true;
    auto r = in_->Read(buf_.data(), buf_.size());
    if (!r.ok()) return r.status();
    pos_ = 0;
    len_ = *r;
    return len_ > 0;
  }
  Status Damaged(const char* format, const std::string& why) const {
    return Status::Error(name() + ": damaged " + format + " data near byte " +
                         std::to_string(in_->file_offset() - (len_ - pos_)) + " (" + why + ")");
  }
  Status Truncated(const char* format) const {
    return Status::Error(name() + ": the " + format + " stream ends early at byte " +
                         std::to_string(in_->file_offset()) + " (truncated download?)");
  }

  std::unique_ptr<ByteSource> in_;
  std::vector<uint8_t> buf_;
  size_t pos_ = 0, len_ = 0;
};

// gzip through ISA-L: header and CRC-32 trailer checked; concatenated members (pigz, bgzip)
// are read one after another, as gzip -d does.
class GzipSource final : public DecoderBase {
 public:
  explicit GzipSource(std::unique_ptr<ByteSource> in) : DecoderBase(std::move(in)) { Reset(); }
  Result<size_t> Read(uint8_t* p, size_t n) override {
    if (n == 0) return size_t{0};
    for (;;) {
      if (done_) {
        // Another member may follow; trailing zero padding (as tape tools write) ends it.
        auto more = Fill();
        if (!more.ok()) return more.status();
        while (*more && pos_ < len_ && buf_[pos_] == 0) ++pos_;
        if (!*more) return size_t{0};
        if (pos_ == len_) continue;
        Reset();
      }
      auto more = Fill();
      if (!more.ok()) return more.status();
      s_.next_in = buf_.data() + pos_;
      s_.avail_in = static_cast<uint32_t>(len_ - pos_);
      s_.next_out = p;
      s_.avail_out = static_cast<uint32_t>(std::min<size_t>(n, UINT32_MAX));
      const size_t before = pos_;
      const int rc = isal_inflate(&s_);
      pos_ = len_ - s_.avail_in;
      const size_t got = static_cast<size_t>(s_.next_out - p);
      if (rc < 0)
        return Damaged("gzip", rc == ISAL_INCORRECT_CHECKSUM ? "CRC-32 mismatch" : "bad stream");
      if (s_.block_state == ISAL_BLOCK_FINISH) done_ = true;
      if (got > 0) return got;
      if (!*more && !done_) return Truncated("gzip");
      // Input left, room for output, and the decoder took nothing and gave nothing: the
      // same call would do the same forever.
      if (pos_ == before && pos_ < len_ && !done_)
        return Damaged("gzip", "the decoder makes no progress");
    }
  }

 private:
  void Reset() {
    isal_inflate_init(&s_);
    s_.crc_flag = ISAL_GZIP;
    done_ = false;
  }
  inflate_state s_;
  bool done_ = false;
};

class ZstdSource final : public DecoderBase {
 public:
  explicit ZstdSource(std::unique_ptr<ByteSource> in)
      : DecoderBase(std::move(in)), d_(ZSTD_createDStream()) {
    ZSTD_initDStream(d_);
  }
  ~ZstdSource() override { ZSTD_freeDStream(d_); }
  Result<size_t> Read(uint8_t* p, size_t n) override {
    if (n == 0) return size_t{0};
    for (;;) {
      auto more = Fill();
      if (!more.ok()) return more.status();
      if (!*more) {
        if (frame_open_) return Truncated("zstd");
        return size_t{0};
      }
      ZSTD_inBuffer ib{buf_.data(), len_, pos_};
      ZSTD_outBuffer ob{p, n, 0};
      const size_t before = pos_;
      const size_t rc = ZSTD_decompressStream(d_, &ob, &ib);
      pos_ = ib.pos;
      if (ZSTD_isError(rc)) return Damaged("zstd", ZSTD_getErrorName(rc));
      frame_open_ = rc != 0;
      if (ob.pos > 0) return ob.pos;
      if (pos_ == before && pos_ < len_)  // (as for gzip: no step forward, ever)
        return Damaged("zstd", "the decoder makes no progress");
    }
  }

 private:
  ZSTD_DStream* d_;
  bool frame_open_ = false;
};

class XzSource final : public DecoderBase {
 public:
  explicit XzSource(std::unique_ptr<ByteSource> in) : DecoderBase(std::move(in)) {
    ok_ = lzma_stream_decoder(&s_, UINT64_MAX, LZMA_CONCATENATED) == LZMA_OK;
  }
  ~XzSource() override { lzma_end(&s_); }
  Result<size_t> Read(uint8_t* p, size_t n) override {
    if (!ok_) return Status::Error(name() + ": cannot start the xz decoder");
    if (n == 0 || ended_) return size_t{0};
    for (;;) {
      auto more = Fill();
      if (!more.ok()) return more.status();
      s_.next_in = buf_.data() + pos_;
      s_.avail_in = len_ - pos_;
      s_.next_out = p;
      s_.avail_out = n;
      const lzma_ret rc = lzma_code(&s_, *more ? LZMA_RUN : LZMA_FINISH);
      pos_ = len_ - s_.avail_in;
      const size_t got = n - s_.avail_out;
      if (rc == LZMA_STREAM_END)
        ended_ = true;
      else if (rc == LZMA_BUF_ERROR && !*more)
        return Truncated("xz");
      else if (rc != LZMA_OK)
        return Damaged("xz", "liblzma error " + std::to_string(rc));
      if (got > 0 || ended_) return got;
    }
  }

 private:
  lzma_stream s_ = LZMA_STREAM_INIT;
  bool ok_ = false, ended_ = false;
};

}  // namespace

Status ByteSource::ReadFull(uint8_t* p, size_t n, const char* what) {
  size_t got = 0;
  while (got < n) {
    auto r = Read(p + got, n - got);
    if (!r.ok()) return r.status();
    if (*r == 0)
      return Status::Error(name() + ": ends early in " + what + " at byte " +
                           std::to_string(file_offset()) + " (truncated?)");
    got += *r;
  }
  return Status::Ok();
}

Status ByteSource::Skip(uint64_t n, const char* what) {
  uint8_t scratch[64 << 10];
  while (n > 0) {
    const size_t k = static_cast<size_t>(std::min<uint64_t>(n, sizeof scratch));
    FANSTORE_RETURN_IF_ERROR(ReadFull(scratch, k, what));
    n -= k;
  }
  return Status::Ok();
}

Compression DetectCompression(const uint8_t* p, size_t n) {
  auto starts = [&](std::initializer_list<uint8_t> sig) {
    return n >= sig.size() && std::memcmp(p, std::data(sig), sig.size()) == 0;
  };
  if (starts({0x1F, 0x8B})) return Compression::kGzip;
  if (starts({0x28, 0xB5, 0x2F, 0xFD})) return Compression::kZstd;
  if (starts({0xFD, '7', 'z', 'X', 'Z', 0x00})) return Compression::kXz;
  if (starts({'B', 'Z', 'h'})) return Compression::kBzip2;
  return Compression::kNone;
}

const char* CompressionName(Compression c) {
  switch (c) {
    case Compression::kGzip:
      return "gzip";
    case Compression::kZstd:
      return "zstd";
    case Compression::kXz:
      return "xz";
    case Compression::kBzip2:
      return "bzip2";
    default:
      return "none";
  }
}

Result<std::unique_ptr<ByteSource>> OpenFileSource(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(path, errno);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  return std::unique_ptr<ByteSource>(std::make_unique<FileSource>(fd, path));
}

Result<std::unique_ptr<ByteSource>> Decompressed(std::unique_ptr<ByteSource> in, Compression c) {
  switch (c) {
    case Compression::kNone:
      return in;
    case Compression::kGzip:
      return std::unique_ptr<ByteSource>(std::make_unique<GzipSource>(std::move(in)));
    case Compression::kZstd:
      return std::unique_ptr<ByteSource>(std::make_unique<ZstdSource>(std::move(in)));
    case Compression::kXz:
      return std::unique_ptr<ByteSource>(std::make_unique<XzSource>(std::move(in)));
    default:
      return Status::Error(in->name() + ": " + CompressionName(c) +
                           "-compressed archives are not supported (use gzip, zstd or xz, "
                           "or decompress it first)");
  }
}

Result<std::unique_ptr<ByteSource>> AutoDecompressed(std::unique_ptr<ByteSource> in) {
  std::vector<uint8_t> head(8);
  size_t got = 0;
  while (got < head.size()) {
    auto r = in->Read(head.data() + got, head.size() - got);
    if (!r.ok()) return r.status();
    if (*r == 0) break;
    got += *r;
  }
  head.resize(got);
  const Compression c = DetectCompression(head.data(), head.size());
  return Decompressed(std::make_unique<ReplaySource>(std::move(in), std::move(head)), c);
}

}  // namespace fanstore::meta
