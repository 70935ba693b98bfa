#include "runtime/process/fd_table.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <new>

#include "base/raw_syscall.h"
#include "runtime/process/env.h"

namespace fanstore::runtime {
namespace {

using base::RawSyscall6;

constexpr size_t kSlabBytes = sizeof(OpenFile) * kMaxDescs + kMaxDescs / 8;

// The inherited slab's memfd if it looks like one (a regular file of the slab's size).
bool LooksLikeSlab(int fd) {
  struct stat st;
  if (fd < 0 || RawSyscall6(SYS_fstat, fd, reinterpret_cast<long>(&st)) != 0) return false;
  const long fl = RawSyscall6(SYS_fcntl, fd, F_GETFL);
  return fl >= 0 && !(fl & O_PATH) && (fl & O_ACCMODE) == O_RDWR && S_ISREG(st.st_mode) &&
         static_cast<size_t>(st.st_size) == kSlabBytes;
}

}  // namespace

void* FdTable::operator new(size_t bytes) noexcept {
  void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return m == MAP_FAILED ? nullptr : m;
}

void FdTable::operator delete(void* p, size_t bytes) noexcept {
  if (p) ::munmap(p, bytes);
}

FdTable::FdTable(int slab_fd, int fd_floor) {
  long fd = -1;
  if (LooksLikeSlab(slab_fd)) {
    fd = slab_fd;
    inherited_ = true;
  } else {
    fd = RawSyscall6(SYS_memfd_create, reinterpret_cast<long>("fanstore-fds"), MFD_CLOEXEC);
    if (fd >= 0 && RawSyscall6(SYS_ftruncate, fd, static_cast<long>(kSlabBytes)) != 0) {
      RawSyscall6(SYS_close, fd);
      fd = -1;
    }
  }
  if (fd < 0) return;  // no slab: every open fails with ENOMEM
  void* m =
      ::mmap(nullptr, kSlabBytes, PROT_READ | PROT_WRITE, MAP_SHARED, static_cast<int>(fd), 0);
  if (m == MAP_FAILED) {
    RawSyscall6(SYS_close, fd);
    inherited_ = false;
    return;
  }
  slab_ = static_cast<OpenFile*>(m);
  used_ = reinterpret_cast<std::atomic<uint64_t>*>(slab_ + kMaxDescs);
  // Into the reserved range, out of the application's way, close-on-exec.
  long moved = fd;
  if (fd_floor > 0 && fd < fd_floor) {
    moved = RawSyscall6(SYS_fcntl, fd, F_DUPFD_CLOEXEC, fd_floor);
    if (moved >= 0) {
      RawSyscall6(SYS_close, fd);
    } else {
      moved = fd;
    }
  }
  RawSyscall6(SYS_fcntl, moved, F_SETFD, FD_CLOEXEC);
  slab_fd_ = static_cast<int>(moved);
}

int FdTable::NewDesc(uint32_t entry, int flags) {
  if (!slab_) return -ENOMEM;
  for (int w = 0; w < kMaxDescs / 64; ++w) {
    uint64_t v = used_[w].load(std::memory_order_relaxed);
    while (v != ~uint64_t{0}) {
      const int bit = __builtin_ctzll(~v);
      if (used_[w].compare_exchange_weak(v, v | (uint64_t{1} << bit), std::memory_order_acq_rel)) {
        const int d = w * 64 + bit;
        OpenFile& f = slab_[d];
        f.offset.store(0, std::memory_order_relaxed);
        f.refs.store(0, std::memory_order_relaxed);
        f.entry = entry;
        f.flags.store(flags, std::memory_order_relaxed);
        return d;
      }
    }
  }
  return -ENFILE;
}

void FdTable::Release(int d) {
  if (slab_[d].refs.fetch_sub(1, std::memory_order_acq_rel) == 1)
    used_[d / 64].fetch_and(~(uint64_t{1} << (d % 64)), std::memory_order_acq_rel);
}

void FdTable::Bind(int fd, int d) {
  SetCloexecSure(fd, false);
  slab_[d].refs.fetch_add(1, std::memory_order_acq_rel);
  const int old = fd_[fd].exchange(d + 1, std::memory_order_acq_rel) - 1;
  bits_[fd / 64].fetch_or(uint64_t{1} << (fd % 64), std::memory_order_release);
  if (old >= 0)
    Release(old);
  else
    bound_.fetch_add(1, std::memory_order_relaxed);
}

void FdTable::Adopt(int fd, int d, bool add_ref) {
  if (add_ref) slab_[d].refs.fetch_add(1, std::memory_order_acq_rel);
  if (fd_[fd].exchange(d + 1, std::memory_order_acq_rel) == 0)
    bound_.fetch_add(1, std::memory_order_relaxed);
  bits_[fd / 64].fetch_or(uint64_t{1} << (fd % 64), std::memory_order_release);
}

void FdTable::ReleaseDesc(int d) {
  if (ValidDesc(d)) Release(d);
}

bool FdTable::Unbind(int fd) {
  if (fd < 0 || fd >= kMaxFds) return false;
  const int old = fd_[fd].exchange(0, std::memory_order_acq_rel) - 1;
  if (old < 0) return false;
  SetCloexecSure(fd, false);
  bits_[fd / 64].fetch_and(~(uint64_t{1} << (fd % 64)), std::memory_order_release);
  bound_.fetch_sub(1, std::memory_order_relaxed);
  Release(old);
  return true;
}

void FdTable::SetCloexecSure(int fd, bool sure) {
  if (fd < 0 || fd >= kMaxFds) return;
  const uint64_t bit = uint64_t{1} << (fd % 64);
  if (sure)
    cloexec_[fd / 64].fetch_or(bit, std::memory_order_relaxed);
  else if (cloexec_[fd / 64].load(std::memory_order_relaxed) & bit)
    cloexec_[fd / 64].fetch_and(~bit, std::memory_order_relaxed);
}

bool FdTable::Park(int fd) {
  // The soft fd limit, read once: parked fds stay below it by kParkRoom.
  static const long limit = [] {
    struct rlimit64 rl;
    return RawSyscall6(SYS_prlimit64, 0, RLIMIT_NOFILE, 0, reinterpret_cast<long>(&rl)) == 0
               ? static_cast<long>(std::min<uint64_t>(rl.rlim_cur, kMaxFds))
               : 0;
  }();
  if (fd <= 2 || fd >= kMaxFds || fd + kParkRoom >= limit) return false;
  if (parked_count_.fetch_add(1, std::memory_order_relaxed) >= kParkMax) {
    parked_count_.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }
  // (also in bits_: the prefilter sends calls on it to the hook, which refuses them)
  parked_[fd / 64].fetch_or(uint64_t{1} << (fd % 64), std::memory_order_release);
  bits_[fd / 64].fetch_or(uint64_t{1} << (fd % 64), std::memory_order_release);
  return true;
}

int FdTable::TakeParked(int below) {
  if (parked_count_.load(std::memory_order_relaxed) == 0) return -1;
  for (int w = 0; w < kMaxFds / 64 && w * 64 < below; ++w) {
    uint64_t v = parked_[w].load(std::memory_order_acquire);
    while (v) {
      const int fd = w * 64 + __builtin_ctzll(v);
      if (fd >= below) return -1;
      if (parked_[w].compare_exchange_weak(v, v & (v - 1), std::memory_order_acq_rel)) {
        parked_count_.fetch_sub(1, std::memory_order_relaxed);
        bits_[w].fetch_and(~(uint64_t{1} << (fd % 64)),
                           std::memory_order_release);  // (Bind sets it)
        return fd;
      }
    }
  }
  return -1;
}

bool FdTable::Unpark(int fd) {
  if (!IsParked(fd)) return false;
  const uint64_t bit = uint64_t{1} << (fd % 64);
  if (!(parked_[fd / 64].fetch_and(~bit, std::memory_order_acq_rel) & bit)) return false;
  parked_count_.fetch_sub(1, std::memory_order_relaxed);
  bits_[fd / 64].fetch_and(~bit, std::memory_order_release);
  return true;
}

void FdTable::OnForkChild() {
  ForEach([this](int, int d) { slab_[d].refs.fetch_add(1, std::memory_order_acq_rel); });
}

void FdTable::ReleaseAll() {
  ForEach([this](int fd, int) { Unbind(fd); });
}

OpenFile* FdTable::Lookup(long fd) const {
  const int d = DescOf(fd);
  return d >= 0 ? &slab_[d] : nullptr;
}

int InheritedSlabFd() {
  const char* v = std::getenv(env::kFds);
  if (!v) return -1;
  char* end;
  const long fd = std::strtol(v, &end, 10);
  return end != v && fd >= 0 && fd < (1L << 30) ? static_cast<int>(fd) : -1;
}

}  // namespace fanstore::runtime
