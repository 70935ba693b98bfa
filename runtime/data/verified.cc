#include "runtime/data/verified.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>

namespace fanstore::runtime {

namespace {

std::atomic<uint64_t>* g_bits = nullptr;
uint64_t g_entries = 0;
bool g_shared = false;

std::atomic<uint64_t>* MapShared(const std::string& path, uint64_t bytes) {
  const int fd = ::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return nullptr;
  struct stat st;
  void* m = MAP_FAILED;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() &&
      !(st.st_mode & 022) && static_cast<uint64_t>(st.st_size) >= bytes)
    m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  return m == MAP_FAILED ? nullptr : static_cast<std::atomic<uint64_t>*>(m);
}

}  // namespace

void AttachVerified(const std::string& path, uint64_t entries) {
  const uint64_t bytes = VerifiedBytes(entries);
  if (bytes == 0) return;
  std::atomic<uint64_t>* bits = path.empty() ? nullptr : MapShared(path, bytes);
  g_shared = bits != nullptr;
  if (!bits) {  // (zero pages: only the words of members read are ever touched)
    void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return;  // every read then checks its member
    bits = static_cast<std::atomic<uint64_t>*>(m);
  }
  g_entries = entries;
  g_bits = bits;
}

bool IsVerified(uint32_t entry) {
  return entry < g_entries &&
         (g_bits[entry / 64].load(std::memory_order_relaxed) >> (entry % 64) & 1) != 0;
}

void MarkVerified(uint32_t entry) {
  if (entry < g_entries)
    g_bits[entry / 64].fetch_or(uint64_t{1} << (entry % 64), std::memory_order_relaxed);
}

bool VerifiedShared() {
  return g_shared;
}

}  // namespace fanstore::runtime
