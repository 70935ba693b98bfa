#include "io/landing.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

#include "base/raw_syscall.h"

namespace fanstore::io {
namespace {

constexpr uint64_t kMagic = 0x31304e444e414c46;  // "FLANDN01"

uint64_t Load(const uint64_t* w) {
  return __atomic_load_n(w, __ATOMIC_ACQUIRE);
}

bool ChunkBytesValid(uint64_t c) {
  return c >= (64u << 10) && c <= (64u << 20) && (c & (c - 1)) == 0;
}

}  // namespace

Result<LandingMap> LandingMap::Create(const std::string& path, const std::vector<uint64_t>& sizes,
                                      uint64_t chunk) {
  if (!ChunkBytesValid(chunk))
    return Status::Error(path + ": " + std::to_string(chunk) + "-byte chunks (not 64 KiB-64 MiB)");
  std::vector<uint64_t> head(kHead + 4 * sizes.size(), 0);
  head[0] = kMagic;
  head[1] = sizes.size();
  head[3] = chunk;
  uint64_t next_word = head.size();
  for (size_t p = 0; p < sizes.size(); ++p) {
    const uint64_t chunks = (sizes[p] + chunk - 1) / chunk;
    const uint64_t words = (chunks + 63) / 64;
    head[kHead + 4 * p + 1] = chunks;
    head[kHead + 4 * p + 2] = next_word;
    head[kHead + 4 * p + 3] = next_word + words;
    next_word += 2 * words;
  }
  const size_t bytes = next_word * 8;
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno(tmp, errno);
  const bool wrote =
      ::ftruncate(fd, static_cast<off_t>(bytes)) == 0 &&
      ::pwrite(fd, head.data(), head.size() * 8, 0) == static_cast<ssize_t>(head.size() * 8);
  void* m = wrote ? ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  const int e = errno;
  ::close(fd);
  if (m == MAP_FAILED || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int why = m == MAP_FAILED ? e : errno;
    if (m != MAP_FAILED) ::munmap(m, bytes);
    ::unlink(tmp.c_str());
    return Status::FromErrno(path, why);
  }
  LandingMap map;
  map.words_ = static_cast<uint64_t*>(m);
  map.bytes_ = bytes;
  return map;
}

LandingMap LandingMap::Attach(const std::string& path) {
  LandingMap map;
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return map;
  struct stat st;
  void* m = MAP_FAILED;
  if (::fstat(fd, &st) == 0 && st.st_size >= 16)
    m = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (m == MAP_FAILED) return map;
  const auto* w = static_cast<const uint64_t*>(m);
  const size_t words = static_cast<size_t>(st.st_size) / 8;
  bool ok = words >= kHead && w[0] == kMagic && w[1] < (1u << 24) && ChunkBytesValid(w[3]) &&
            kHead + 4 * w[1] <= words;
  for (uint64_t p = 0; ok && p < w[1]; ++p) {  // every slot's bits inside the file
    const uint64_t* s = w + kHead + 4 * p;
    const uint64_t n = (s[1] + 63) / 64;
    ok = s[2] <= words && s[3] <= words && n <= words - s[2] && n <= words - s[3];
  }
  if (!ok) {
    ::munmap(m, static_cast<size_t>(st.st_size));
    return map;
  }
  map.words_ = static_cast<uint64_t*>(m);
  map.bytes_ = static_cast<size_t>(st.st_size);
  return map;
}

void LandingMap::Close() {
  if (words_) ::munmap(words_, bytes_);
  words_ = nullptr;
}

bool LandingMap::Bit(uint64_t first_word, uint64_t i) const {
  return (Load(words_ + first_word + i / 64) >> (i % 64)) & 1;
}

bool LandingMap::RangeLanded(uint32_t p, uint64_t off, uint64_t len) const {
  if (p >= parts() || len == 0) return p < parts();
  const uint64_t last = (off + len - 1) / chunk_bytes();
  if (last >= chunks(p)) return false;
  for (uint64_t c = off / chunk_bytes(); c <= last; ++c)
    if (!Landed(p, c)) return false;
  return true;
}

void LandingMap::Want(uint32_t p, uint64_t off, uint64_t len) {
  if (p >= parts() || len == 0) return;
  const uint64_t* s = Slot(p);
  const uint64_t last = std::min((off + len - 1) / chunk_bytes(), s[1] - 1);
  bool news = false;
  for (uint64_t c = off / chunk_bytes(); c <= last && s[1] > 0; ++c)
    if (!Landed(p, c) && !Bit(s[3], c)) {
      __atomic_fetch_or(words_ + s[3] + c / 64, uint64_t{1} << (c % 64), __ATOMIC_RELEASE);
      news = true;
    }
  if (news) Nudge();
}

uint32_t LandingMap::WantCount() const {
  return __atomic_load_n(reinterpret_cast<const uint32_t*>(words_ + 4), __ATOMIC_ACQUIRE);
}

void LandingMap::WaitForWant(uint32_t seen, int64_t timeout_ns) const {
  timespec t{static_cast<time_t>(timeout_ns / 1'000'000'000),
             static_cast<long>(timeout_ns % 1'000'000'000)};
  base::RawSyscall6(SYS_futex, reinterpret_cast<long>(words_ + 4), FUTEX_WAIT, seen,
                    reinterpret_cast<long>(&t));
}

void LandingMap::Nudge() {
  __atomic_fetch_add(reinterpret_cast<uint32_t*>(words_ + 4), 1u, __ATOMIC_RELEASE);
  base::RawSyscall6(SYS_futex, reinterpret_cast<long>(words_ + 4), FUTEX_WAKE, INT_MAX);
}

int64_t LandingMap::NextWanted(uint32_t p, const std::vector<uint64_t>& issued,
                               uint64_t from) const {
  const uint64_t* s = Slot(p);
  for (uint64_t w = from / 64; w * 64 < s[1]; ++w) {
    uint64_t open =
        Load(words_ + s[3] + w) & ~Load(words_ + s[2] + w) & ~(w < issued.size() ? issued[w] : 0);
    if (w == from / 64) open &= ~uint64_t{0} << (from % 64);
    if (open) return static_cast<int64_t>(w * 64 + static_cast<uint64_t>(__builtin_ctzll(open)));
  }
  return -1;
}

void LandingMap::Land(uint32_t p, uint64_t chunk) {
  const uint64_t* s = Slot(p);
  __atomic_fetch_or(words_ + s[2] + chunk / 64, uint64_t{1} << (chunk % 64), __ATOMIC_RELEASE);
  __atomic_fetch_add(reinterpret_cast<uint32_t*>(Slot(p)), 1u, __ATOMIC_RELEASE);
  Wake(p);
}

LandingState LandingMap::State(uint32_t p) const {
  return static_cast<LandingState>(
      __atomic_load_n(reinterpret_cast<const uint32_t*>(Slot(p)) + 1, __ATOMIC_ACQUIRE));
}

void LandingMap::SetState(uint32_t p, LandingState st) {
  __atomic_store_n(reinterpret_cast<uint32_t*>(Slot(p)) + 1, static_cast<uint32_t>(st),
                   __ATOMIC_RELEASE);
  __atomic_fetch_add(reinterpret_cast<uint32_t*>(Slot(p)), 1u, __ATOMIC_RELEASE);
  Wake(p);
}

uint32_t LandingMap::Count(uint32_t p) const {
  return __atomic_load_n(reinterpret_cast<const uint32_t*>(Slot(p)), __ATOMIC_ACQUIRE);
}

uint64_t LandingMap::Progress() const {
  uint64_t sum = 0;
  for (uint32_t p = 0; p < parts(); ++p) sum += Count(p);
  return sum;
}

void LandingMap::Wait(uint32_t p, uint32_t seen, int64_t timeout_ns) const {
  timespec t{static_cast<time_t>(timeout_ns / 1'000'000'000),
             static_cast<long>(timeout_ns % 1'000'000'000)};
  // (shared, not private: the word is in a file mapped by several processes)
  base::RawSyscall6(SYS_futex, reinterpret_cast<long>(Slot(p)), FUTEX_WAIT, seen,
                    reinterpret_cast<long>(&t));
}

void LandingMap::SetCopying(bool on) {
  __atomic_store_n(words_ + 2, on ? 1 : 0, __ATOMIC_RELEASE);
  for (uint32_t p = 0; p < parts(); ++p) Wake(p);
}

bool LandingMap::Copying() const {
  return Load(words_ + 2) != 0;
}

void LandingMap::SetFromData(bool on) {
  __atomic_store_n(words_ + 5, on ? 1 : 0, __ATOMIC_RELEASE);
}

bool LandingMap::FromData() const {
  return Load(words_ + 5) != 0;
}

void LandingMap::Wake(uint32_t p) const {
  base::RawSyscall6(SYS_futex, reinterpret_cast<long>(Slot(p)), FUTEX_WAKE, INT_MAX);
}

}  // namespace fanstore::io
