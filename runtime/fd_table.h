// The virtual fd table. Every virtual fd is a real kernel fd (an O_PATH placeholder on
// /dev/null, so close/dup/CLOEXEC/poll behave, numbers never collide and an unintercepted
// read fails with EBADF). The fd -> description map is process-local and lock-free for
// readers; the open-file descriptions (offset, flags, entry) live in a MAP_SHARED slab, so
// a forked child shares offsets with its parent as POSIX says.
// Thread-safety: all methods are safe from any thread; Bind/Unbind of the same fd race
// only as the application's own close/dup would.
#pragma once

#include <atomic>
#include <cstdint>

namespace fanstore::runtime {

inline constexpr int kMaxFds = 1 << 16;
inline constexpr int kMaxDescs = 1 << 15;

struct OpenFile {
  std::atomic<int64_t> offset;  // byte offset, or the next directory slot for getdents
  std::atomic<int32_t> refs;    // fds referring to it, in every process
  uint32_t entry;               // namespace entry
  std::atomic<int32_t> flags;   // open flags (status flags settable by F_SETFL)
};

class FdTable {
 public:
  FdTable();
  // A new description for `entry`, or -ENFILE.
  int NewDesc(uint32_t entry, int flags);
  // fd -> desc (takes a reference); replaces a previous binding of fd.
  void Bind(int fd, int desc);
  // Drops fd's binding; returns whether fd was virtual.
  bool Unbind(int fd);
  // The description of a virtual fd, or nullptr.
  OpenFile* Lookup(long fd) const;
  // `fd` as it arrives in a register: only its low 32 bits are the fd (an int).
  int DescOf(long fd_arg) const {
    const int fd = static_cast<int>(fd_arg);
    return fd >= 0 && fd < kMaxFds ? fd_[fd].load(std::memory_order_acquire) : -1;
  }
  OpenFile& desc(int d) { return slab_[d]; }
  // For the prefilter (no vector registers: plain words): the bitmap of virtual fds, the
  // fd -> description map and the descriptions.
  const std::atomic<uint64_t>* bits() const { return bits_; }
  const std::atomic<int32_t>* fd_map() const { return fd_; }
  const OpenFile* slab() const { return slab_; }

 private:
  void Release(int d);
  std::atomic<int32_t> fd_[kMaxFds];  // -1: not virtual
  std::atomic<uint64_t> bits_[kMaxFds / 64];
  OpenFile* slab_;               // kMaxDescs, MAP_SHARED
  std::atomic<uint64_t>* used_;  // kMaxDescs bits, MAP_SHARED
};

FdTable& Fds();

}  // namespace fanstore::runtime
