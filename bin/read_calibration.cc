#include "bin/read_calibration.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>

namespace fanstore::fanrun {
namespace {

constexpr size_t kPiece = 64 << 10;
constexpr size_t kMost = 8 << 20;
constexpr int kRounds = 3;  // the least of each (this VM's speed wanders within a second)

double NsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::optional<ReadCost> MeasureReadCost(const std::string& blob) {
  const int fd = ::open(blob.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st;
  if (::fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(1 << 20)) {
    ::close(fd);
    return std::nullopt;
  }
  const size_t len = std::min<size_t>(kMost, static_cast<size_t>(st.st_size)) / kPiece * kPiece;
  std::unique_ptr<char[]> buf(new char[kPiece]);
  auto read_all = [&] {
    for (size_t off = 0; off < len; off += kPiece)
      if (::pread(fd, buf.get(), kPiece, static_cast<off_t>(off)) != static_cast<ssize_t>(kPiece))
        return false;
    return true;
  };
  std::optional<ReadCost> out;
  if (read_all()) {  // (untimed: brings the region into the page cache, and buf's pages in)
    ReadCost c{1e18, 1e18, 1e18};
    const double pieces = static_cast<double>(len / kPiece);
    bool ok = true;
    for (int r = 0; r < kRounds && ok; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      ok = read_all();
      c.pread = std::min(c.pread, NsSince(t0) / pieces);
      void* m = ::mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
      if (m == MAP_FAILED) {
        ok = false;
        break;
      }
      for (double* cost : {&c.map_first, &c.map_again}) {
        t0 = std::chrono::steady_clock::now();
        for (size_t off = 0; off < len; off += kPiece)
          std::memcpy(buf.get(), static_cast<const char*>(m) + off, kPiece);
        asm volatile("" : : "r"(buf.get()) : "memory");  // (the copies are not dead stores)
        *cost = std::min(*cost, NsSince(t0) / pieces);
      }
      ::munmap(m, len);
    }
    if (ok) out = c;
  }
  ::close(fd);
  return out;
}

}  // namespace fanstore::fanrun
