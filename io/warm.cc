#include "io/warm.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "base/map_aligned.h"

namespace fanstore::io {
namespace {

constexpr int kMadvPopulateRead = 22;  // (Linux 5.14)
constexpr uint64_t kStep = 8u << 20;

}  // namespace

Result<WarmResult> WarmHuge(const std::string& path, const std::atomic<bool>* cancel) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(path, errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return Status::FromErrno(path, e);
  }
  WarmResult r;
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  const long m = size ? base::MapHugeAligned(fd, size) : -EINVAL;
  ::close(fd);  // (the mapping holds the file)
  if (m < 0) return size ? Status::FromErrno(path, static_cast<int>(-m)) : Result<WarmResult>(r);
  auto* base = reinterpret_cast<uint8_t*>(m);
  // Each 2 MiB range not cached yet is then read as one 2 MiB folio when first touched.
  // MADV_RANDOM turns off the ordinary readahead, whose window (read_ahead_kb, 128 KiB by
  // default) caps its folios far below 2 MiB: without it, one range cached before (fanrun's
  // read calibration, a reader ahead of the warm) chains small-folio readahead through the
  // rest (here: 18 of 58 MiB in huge folios, against 58 of 58). (Both are refused where
  // THP is compiled out: small folios then.)
  ::madvise(base, size, MADV_HUGEPAGE);
  ::madvise(base, size, MADV_RANDOM);
  for (uint64_t off = 0; off < size && !(cancel && cancel->load(std::memory_order_relaxed));
       off += kStep) {
    const uint64_t n = std::min(kStep, size - off);
    if (::madvise(base + off, n, kMadvPopulateRead) != 0) {
      if (errno == EINVAL) r.supported = false;  // an older kernel: nothing to do
      if (errno != EINTR && errno != EAGAIN) break;
    }
    r.bytes = off + n;
  }
  ::munmap(base, size);
  return r;
}

}  // namespace fanstore::io
