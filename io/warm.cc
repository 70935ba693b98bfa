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
  const long m = size ? base::MapForHugeReads(fd, size) : 0;
  ::close(fd);  // (the mapping holds the file)
  if (size == 0) return r;
  if (m < 0) return Status::FromErrno(path, static_cast<int>(-m));
  const auto* map = reinterpret_cast<const uint8_t*>(m);
  for (uint64_t off = 0; off < size && !(cancel && cancel->load(std::memory_order_relaxed));
       off += kStep) {
    const uint64_t n = std::min(kStep, size - off);
    if (const long rc = base::PopulateRead(map, off, n); rc != 0) {
      if (rc == -EINVAL) r.supported = false;  // an older kernel: nothing to do
      if (rc != -EINTR && rc != -EAGAIN) break;
    }
    r.bytes = off + n;
  }
  ::munmap(const_cast<uint8_t*>(map), size);
  return r;
}

}  // namespace fanstore::io
