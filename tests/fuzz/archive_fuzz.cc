// The archive readers over any bytes: a tar (plain or gzip/zstd/xz, as the first bytes
// say) and a zip are read entry by entry with their data, and end in an error or the
// archive's end, never a crash, a hang or an over-read. Reads are capped per input (a
// sparse member may declare a size far beyond its bytes, which a real pack would write).
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "meta/archive_reader.h"

namespace {

using fanstore::Result;
using fanstore::meta::ArchiveEntry;
using fanstore::meta::ByteSource;
using fanstore::meta::EntryReader;

class MemSource final : public ByteSource {
 public:
  MemSource(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  Result<size_t> Read(uint8_t* out, size_t n) override {
    const size_t k = std::min(n, n_ - at_);
    std::memcpy(out, p_ + at_, k);
    at_ += k;
    return k;
  }
  uint64_t file_offset() const override { return at_; }
  const std::string& name() const override { return name_; }

 private:
  const uint8_t* p_;
  size_t n_, at_ = 0;
  std::string name_ = "fuzz";
};

void Drain(EntryReader& r) {
  static uint8_t buf[64 << 10];
  size_t budget = 64 << 20;
  ArchiveEntry e;
  for (int entries = 0; entries < 100000; ++entries) {
    auto more = r.Next(&e);
    if (!more.ok() || !*more) return;
    for (;;) {
      auto got = r.ReadData(buf, sizeof buf);
      if (!got.ok() || *got == 0) break;
      if (*got > sizeof buf) std::abort();
      if (*got >= budget) return;
      budget -= *got;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto src = fanstore::meta::AutoDecompressed(std::make_unique<MemSource>(data, size));
  if (src.ok()) {
    auto tar = fanstore::meta::NewTarReader(std::move(*src));
    Drain(*tar);
  }
  // The same bytes as a zip file.
  const int fd = ::memfd_create("fuzz-zip", MFD_CLOEXEC);
  if (fd < 0) return 0;
  if (::write(fd, data, size) == static_cast<ssize_t>(size)) {
    auto zip = fanstore::meta::OpenZipReader("/proc/self/fd/" + std::to_string(fd));
    if (zip.ok()) Drain(**zip);
  }
  ::close(fd);
  return 0;
}
