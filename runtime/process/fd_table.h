// The virtual fd table. Every virtual fd is a real kernel fd (an O_PATH placeholder on
// /dev/null, so close/dup/CLOEXEC behave, numbers never collide and an unintercepted read
// fails with EBADF). The fd -> description map is process-local and lock-free for
// readers; the open-file descriptions (offset, flags, entry, references) live in a slab in
// a memfd mapped MAP_SHARED, so a forked child shares offsets with its parent as POSIX
// says, and an exec'd program that inherits a virtual fd maps the same slab (see
// runtime/calls/inherit.h) and keeps sharing them.
// References: every fd bound to a description in any process counts once. A forked
// child's copies are counted by OnForkChild, a process's own at exit are dropped by
// ReleaseAll; a process killed by a signal leaks its references (a slot stays used, no
// bytes go wrong).
// Thread-safety: all methods are safe from any thread; Bind/Unbind of the same fd race
// only as the application's own close/dup would.
#pragma once

#include <atomic>
#include <cstddef>
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
  // Maps the slab inherited through exec (`slab_fd` >= 0, checked) or a new one; the slab's
  // memfd is moved to `fd_floor` or above (the runtime's reserved range).
  FdTable(int slab_fd, int fd_floor);
  // A table lives in pages of its own, mapped zero (nullptr when there is no memory): its
  // ~280 KB of per-fd arrays are never written at construction, so a process touches
  // only the pages of the fds it makes virtual, not 70 pages at every start.
  static void* operator new(size_t bytes) noexcept;
  static void operator delete(void* p, size_t bytes) noexcept;
  // A new description for `entry`, or -ENFILE.
  int NewDesc(uint32_t entry, int flags);
  // fd -> desc (takes a reference); replaces a previous binding of fd.
  void Bind(int fd, int desc);
  // fd -> desc for an fd inherited through exec, whose reference the old program already
  // counted (`add_ref` false) or did not (a vfork child's copy: true).
  void Adopt(int fd, int desc, bool add_ref);
  // Drops one reference of `desc` (an inherited fd the old program had and exec closed).
  void ReleaseDesc(int desc);
  // Drops fd's binding; returns whether fd was virtual.
  bool Unbind(int fd);

  // Parked fds: the placeholder of a closed virtual fd, kept open (FD_CLOEXEC) for a later
  // open to take instead of a new one, which saves that open's system call and the close's
  // (a DataLoader worker opens, reads and closes one file after another). To the
  // application a parked fd is closed: it stays in bits() so that the prefilter sends
  // calls on it to the hook, which fails them with EBADF (hook.cc OnParkedFd; close,
  // fcntl, dup: their handlers), and dup2/dup3 onto it and close_range over it take it
  // back (Unpark) before the kernel acts. A path call relative to one reaches the kernel,
  // which finds an O_PATH placeholder on /dev/null (ENOTDIR, not EBADF). fds 0-2 are never
  // parked (the stdio redirection idioms close one and expect the next open to take it),
  // nor one within kParkRoom of the soft RLIMIT_NOFILE, and at most kParkMax are.
  static constexpr int kParkMax = 8;
  static constexpr int kParkRoom = 64;
  // Parks `fd`, which the caller has unbound and whose placeholder carries FD_CLOEXEC
  // (CloexecSure); false when it may not be parked (the caller closes it).
  bool Park(int fd);
  // Takes the lowest parked fd below `below`, or returns -1.
  int TakeParked(int below);
  // Takes back `fd` if it is parked; returns whether it was.
  bool Unpark(int fd);
  bool IsParked(long fd_arg) const {
    const int fd = static_cast<int>(fd_arg);
    return fd >= 0 && fd < kMaxFds &&
           (parked_[fd / 64].load(std::memory_order_relaxed) >> (fd % 64) & 1);
  }
  // Whether the kernel's FD_CLOEXEC on virtual fd `fd` is known to be set: set by the open
  // that made it with O_CLOEXEC, kept by F_SETFD and FIOCLEX/FIONCLEX, unknown (false) for
  // an fd made by dup, which is never parked.
  void SetCloexecSure(int fd, bool sure);
  bool CloexecSure(int fd) const {
    return fd >= 0 && fd < kMaxFds &&
           (cloexec_[fd / 64].load(std::memory_order_relaxed) >> (fd % 64) & 1);
  }
  // In a forked child: its copies of the parent's virtual fds become references.
  void OnForkChild();
  // At exit: the process's fds stop referring to their descriptions.
  void ReleaseAll();
  // The description of a virtual fd, or nullptr.
  OpenFile* Lookup(long fd) const;
  // `fd` as it arrives in a register: only its low 32 bits are the fd (an int).
  int DescOf(long fd_arg) const {
    const int fd = static_cast<int>(fd_arg);
    return fd >= 0 && fd < kMaxFds ? fd_[fd].load(std::memory_order_acquire) - 1 : -1;
  }
  bool ValidDesc(int d) const {
    return slab_ && d >= 0 && d < kMaxDescs &&
           (used_[d / 64].load(std::memory_order_acquire) >> (d % 64) & 1);
  }
  OpenFile& desc(int d) { return slab_[d]; }
  int slab_fd() const { return slab_fd_; }
  // True when the slab is the one the program that exec'd us passed on.
  bool inherited() const { return inherited_; }
  // Calls fn(fd, desc) for every virtual fd, lowest first.
  template <typename Fn>
  void ForEach(Fn fn) const {
    for (int w = 0; w < kMaxFds / 64; ++w) {
      for (uint64_t v = bits_[w].load(std::memory_order_acquire); v; v &= v - 1) {
        const int fd = w * 64 + __builtin_ctzll(v);
        const int d = fd_[fd].load(std::memory_order_acquire) - 1;
        if (d >= 0) fn(fd, d);
      }
    }
  }
  // For the prefilter (no vector registers: plain words): the bitmap of virtual fds, the
  // fd -> description map and the descriptions.
  const std::atomic<uint64_t>* bits() const { return bits_; }
  // How many fds are virtual now (poll and select need no look at their arrays at 0).
  const std::atomic<int>* bound() const { return &bound_; }
  const std::atomic<int32_t>* fd_map() const { return fd_; }  // description + 1; 0: none
  const OpenFile* slab() const { return slab_; }
  bool AnyParked() const { return parked_count_.load(std::memory_order_relaxed) > 0; }

 private:
  void Release(int d);
  // The per-fd arrays, left as operator new gives them (zero): a union's members are not
  // initialised unless its constructor says so.
  union Arrays {
    Arrays() {}
    struct {
      std::atomic<int32_t> fd[kMaxFds];  // the description + 1; 0: not virtual
      std::atomic<uint64_t> bits[kMaxFds / 64];
      std::atomic<uint64_t> parked[kMaxFds / 64];
      std::atomic<uint64_t> cloexec[kMaxFds / 64];
    } a;
  } arrays_;
  std::atomic<int32_t>* const fd_ = arrays_.a.fd;
  std::atomic<uint64_t>* const bits_ = arrays_.a.bits;
  std::atomic<uint64_t>* const parked_ = arrays_.a.parked;
  std::atomic<uint64_t>* const cloexec_ = arrays_.a.cloexec;
  std::atomic<int> bound_{0};
  std::atomic<int> parked_count_{0};
  OpenFile* slab_ = nullptr;               // kMaxDescs, MAP_SHARED
  std::atomic<uint64_t>* used_ = nullptr;  // kMaxDescs bits, MAP_SHARED
  int slab_fd_ = -1;  // the slab's memfd (CLOEXEC except at an exec passing fds on)
  bool inherited_ = false;
};

// The process's table, made at its first use (runtime/process/state.cc: with the state's
// reserved fd range); never destroyed, since hooks may run during exit.
FdTable& Fds();

// The slab fd named by FANSTORE_FDS, or -1.
int InheritedSlabFd();

}  // namespace fanstore::runtime
