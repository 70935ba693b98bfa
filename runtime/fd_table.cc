#include "runtime/fd_table.h"

#include <sys/mman.h>

#include <cerrno>
#include <new>

namespace fanstore::runtime {

FdTable::FdTable() {
  for (auto& f : fd_) f.store(-1, std::memory_order_relaxed);
  for (auto& b : bits_) b.store(0, std::memory_order_relaxed);
  const size_t bytes = sizeof(OpenFile) * kMaxDescs + kMaxDescs / 8;
  void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  slab_ = m == MAP_FAILED ? nullptr : static_cast<OpenFile*>(m);
  used_ = slab_ ? reinterpret_cast<std::atomic<uint64_t>*>(slab_ + kMaxDescs) : nullptr;
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
  slab_[d].refs.fetch_add(1, std::memory_order_acq_rel);
  const int old = fd_[fd].exchange(d, std::memory_order_acq_rel);
  bits_[fd / 64].fetch_or(uint64_t{1} << (fd % 64), std::memory_order_release);
  if (old >= 0) Release(old);
}

bool FdTable::Unbind(int fd) {
  if (fd < 0 || fd >= kMaxFds) return false;
  const int old = fd_[fd].exchange(-1, std::memory_order_acq_rel);
  if (old < 0) return false;
  bits_[fd / 64].fetch_and(~(uint64_t{1} << (fd % 64)), std::memory_order_release);
  Release(old);
  return true;
}

OpenFile* FdTable::Lookup(long fd) const {
  const int d = DescOf(fd);
  return d >= 0 ? &slab_[d] : nullptr;
}

FdTable& Fds() {
  static FdTable* t = new FdTable();  // never destroyed: hooks may run during exit
  return *t;
}

}  // namespace fanstore::runtime
