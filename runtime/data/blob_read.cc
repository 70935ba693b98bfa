#include <fcntl.h>
#include <liburing.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "base/copy_alias.h"
#include "base/map_aligned.h"
#include "base/page_size.h"
#include "base/raw_syscall.h"
#include "runtime/data/member_io_parts.h"

namespace fanstore::runtime {
namespace {

constexpr uint64_t kWindowTag = 1;  // user_data of window reads; member reads carry 0

struct Ring {
  io_uring ring;
  pid_t owner = 0;
  bool ok = false;
  bool window_in_flight = false;  // a readahead window read (kWindowTag) not reaped yet
  void* scratch = nullptr;        // where window reads land (never read back)
  ~Ring() {
    if (!Get() || owner != Get()->pid.load(std::memory_order_relaxed)) return;
    // A window read still writing into the scratch is waited for (closing the ring does
    // not wait for it); with a failed ring it is left mapped rather than unmapped under it.
    io_uring_cqe* cqe = nullptr;
    while (ok && window_in_flight && io_uring_wait_cqe(&ring, &cqe) == 0) {
      window_in_flight = io_uring_cqe_get_data64(cqe) != kWindowTag;
      io_uring_cqe_seen(&ring, cqe);
    }
    if (ok) io_uring_queue_exit(&ring);
    if (scratch && !window_in_flight)
      base::RawSyscall6(SYS_munmap, reinterpret_cast<long>(scratch), kScratchBytes);
  }
  static constexpr long kScratchBytes = 4l << 20;  // the largest readahead window taken this way
};
thread_local Ring t_ring;

// Reads blob bytes. Data already in the page cache is copied by preadv2(RWF_NOWAIT): a
// plain copy, where an io_uring read costs 0.5-1 us more on ext4, and on tmpfs (the
// default local directory, which has no nowait support) is handed to an io-wq worker
// thread: 46 us instead of 1-4 us (measured, docs/design.md). Data that is not cached
// (EAGAIN) is read through this thread's io_uring; memory-backed files that refuse
// RWF_NOWAIT (EOPNOTSUPP) are read with pread, which cannot block on a device there. A
// fork child makes its own ring: the pid is State::pid, kept current by the atfork
// handler, so no system call is made for it.
// fds known to refuse RWF_NOWAIT, so that their reads skip the attempt (a bit left over
// from a closed fd only makes the next file at that number use plain pread: still right).
std::atomic<uint64_t> s_no_nowait[1 << 10];

// Cold reads: the aligned window around a member that is not cached is read ahead
// (asynchronously: StartWindowRead, else fadvise WILLNEED) with the member's own read, so
// the members packed next to it are cached when the random order reaches them: 2-thread
// cold reads went from ~11 k to ~14 k files/s with 1 MiB (docs/design.md). It costs device
// bandwidth for neighbours read later, which pays only if they stay cached until then:
// "auto" (FANSTORE_READAHEAD unset) uses 1 MiB when this node's blobs fit in half of
// the memory, else nothing.
constexpr uint64_t kAutoReadahead = 1u << 20;

uint64_t ReadaheadBytes(const State& s) {
  static std::atomic<int64_t> decided{-1};
  int64_t v = decided.load(std::memory_order_relaxed);
  if (v >= 0) return static_cast<uint64_t>(v);
  if (s.readahead >= 0) {
    v = s.readahead;
  } else {
    uint64_t local = 0;
    for (const std::string& p : s.parts) {
      struct stat st;
      if (!p.empty() &&
          base::RawSyscall6(SYS_newfstatat, AT_FDCWD, reinterpret_cast<long>(p.c_str()),
                            reinterpret_cast<long>(&st), 0) == 0)
        local += static_cast<uint64_t>(st.st_size);
    }
    struct sysinfo si;
    const bool known = base::RawSyscall6(SYS_sysinfo, reinterpret_cast<long>(&si)) == 0;
    const uint64_t mem = known ? static_cast<uint64_t>(si.totalram) * si.mem_unit : 0;
    v = local <= mem / 2 ? static_cast<int64_t>(kAutoReadahead) : 0;
  }
  decided.store(v, std::memory_order_relaxed);
  return static_cast<uint64_t>(v);
}

// The readahead window as a real read into a scratch buffer, handed to this thread's
// io_uring without waiting: the kernel's on-demand readahead brings the pages in as large
// folios, which later kernel copies (the first pass of a new process) take ~15% faster
// than the 4 KiB folios of fadvise(WILLNEED); the cold epoch itself runs the same
// (measured, docs/design.md). One window in flight per thread: false (use fadvise) while
// one is, or without a ring or scratch memory. Its completion is reaped by a later read.
bool StartWindowRead(int fd, uint64_t off, uint64_t len) {
  if (!t_ring.ok || len > static_cast<uint64_t>(Ring::kScratchBytes)) return false;
  if (t_ring.window_in_flight) {
    io_uring_cqe* cqe = nullptr;
    if (io_uring_peek_cqe(&t_ring.ring, &cqe) != 0) return false;
    // Only window reads can be pending here: member reads are waited for.
    io_uring_cqe_seen(&t_ring.ring, cqe);
    t_ring.window_in_flight = false;
  }
  if (!t_ring.scratch) {
    const long m = base::RawSyscall6(SYS_mmap, 0, Ring::kScratchBytes, PROT_READ | PROT_WRITE,
                                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m < 0) return false;
    t_ring.scratch = reinterpret_cast<void*>(m);
  }
  io_uring_sqe* sqe = io_uring_get_sqe(&t_ring.ring);
  if (!sqe) return false;
  io_uring_prep_read(sqe, fd, t_ring.scratch, static_cast<unsigned>(len), off);
  io_uring_sqe_set_data64(sqe, kWindowTag);
  t_ring.window_in_flight = true;
  return true;  // submitted together with the member's read
}

// This thread's area for copies that alias (base/copy_alias.h), mapped on first use: a piece
// of kStagingPiece bytes (small enough to stay in the core's cache between its two copies)
// placed anywhere in its first page. nullptr when it cannot be mapped (then copies are direct).
constexpr size_t kStagingPiece = 128u << 10;
struct Staging {
  uint8_t* area = nullptr;
  ~Staging() {
    if (area) base::RawSyscall6(SYS_munmap, reinterpret_cast<long>(area), kBytes);
  }
  static constexpr long kBytes = static_cast<long>(kStagingPiece + base::kAliasPage);
};
thread_local Staging t_staging;

uint8_t* StagingArea() {
  if (!t_staging.area) {
    const long m = base::RawSyscall6(SYS_mmap, 0, Staging::kBytes, PROT_READ | PROT_WRITE,
                                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m < 0) return nullptr;
    t_staging.area = reinterpret_cast<uint8_t*>(m);
  }
  return t_staging.area;
}

// Reads left to ask mincore before reading (PreadBlob): set by a read that found its blob
// cold, counted down by reads that find theirs cached. A warm process never asks.
constexpr int kColdProbes = 64;
thread_local int t_cold_probes = 0;

// The 2 MiB-aligned window of the blob around `at`, faulted into the page cache through the
// blob's mapping (State::BlobMap, base/map_aligned.h MapForHugeReads): the kernel reads a
// range not cached yet as one 2 MiB folio (file systems with large folios), and
// later epochs copy members out of huge folios (1.3-1.5x native warm, against 1.1x from the
// small folios of 1 MiB windows; docs/performance.md). Synchronous: the window is what the
// member's own read would have waited for, and the members beside it are read by the
// same epoch. False where the kernel has no MADV_POPULATE_READ (5.14) or the range
// cannot be read (then the ordinary read says why).
bool HugeWindow(const uint8_t* map, uint64_t map_size, uint64_t at) {
  const uint64_t start = at / base::kHugePage * base::kHugePage;
  if (start >= map_size) return false;
  return base::PopulateRead(map, start, std::min<uint64_t>(base::kHugePage, map_size - start)) == 0;
}

// The in-place blob of `partition` as mapped by State::BlobMap, or nullptr (none asked for,
// a staged copy on tmpfs, no mapping).
const uint8_t* InPlaceMap(uint32_t partition, uint64_t* size) {
  if (partition == kNoPartition) return nullptr;
  bool resident = false;
  const uint8_t* map = Get()->BlobMap(partition, size, &resident);
  return resident ? nullptr : map;
}

}  // namespace

long PreadBlob(int fd, void* buf, size_t len, uint64_t off, uint32_t partition) {
  bool windowed = false;  // (one huge window per call: a window evicted at once is read)
  // (the mapping is looked up only by reads that may need it: a warm process never does)
  uint64_t map_size = 0;
  const uint8_t* map = nullptr;
  // While reads find the blob cold, the window is brought in before the read: a read that
  // misses the page cache starts the kernel's own readahead in small folios even with
  // RWF_NOWAIT, so it must not be the first to touch the range. mincore of the first page
  // tells; a process stops asking after kColdProbes reads in a row found theirs cached.
  if (t_cold_probes > 0 && (map = InPlaceMap(partition, &map_size)) && off < map_size &&
      ReadaheadBytes(*Get())) {
    unsigned char v = 0;
    const uint64_t page = off / base::PageSize() * base::PageSize();
    if (base::RawSyscall6(SYS_mincore, reinterpret_cast<long>(map + page),
                          static_cast<long>(base::PageSize()), reinterpret_cast<long>(&v)) == 0 &&
        !(v & 1)) {
      t_cold_probes = kColdProbes;
      windowed = HugeWindow(map, map_size, off);
    } else {
      --t_cold_probes;
    }
  }
  const bool known = fd >= 0 && fd < (1 << 16);
  std::atomic<uint64_t>* word = known ? &s_no_nowait[fd / 64] : nullptr;
  const uint64_t bit = uint64_t{1} << (fd & 63);
  size_t done = 0;
  bool staged = false;
  while (done < len) {
    char* at = static_cast<char*>(buf) + done;
    size_t want = std::min<size_t>(len - done, 1u << 30);
    // A cached copy that would alias (base/copy_alias.h) lands in the staging area first, a
    // piece at a time; a device read goes straight to `at` (the device dominates its time).
    char* into = at;
    if (base::CopyAliases(at, off + done, want)) {
      if (uint8_t* area = StagingArea()) {
        into = reinterpret_cast<char*>(base::StagingFor(area, at));
        want = std::min(want, kStagingPiece);
      }
    }
    iovec iov{into, want};
    const bool skip = word && (word->load(std::memory_order_relaxed) & bit);
    long n = skip ? -EOPNOTSUPP
                  : base::RawSyscall6(SYS_preadv2, fd, reinterpret_cast<long>(&iov), 1,
                                      static_cast<long>(off + done), 0, RWF_NOWAIT);
    if (n == -EOPNOTSUPP || n == -ENOSYS) {  // (ENOSYS: qemu-user, which lacks preadv2)
      if (word && !skip) word->fetch_or(bit, std::memory_order_relaxed);
      n = base::RawSyscall6(SYS_pread64, fd, reinterpret_cast<long>(into), static_cast<long>(want),
                            static_cast<long>(off + done));
    } else if (n == -EAGAIN) {
      into = at;  // not in the page cache: the device read goes through io_uring
      g_io.device.Add(1);
      const pid_t me = Get()->pid.load(std::memory_order_relaxed);
      if (t_ring.owner != me) {  // a new thread, or a fork child (the parent's ring is not its own)
        t_ring.ok = io_uring_queue_init(8, &t_ring.ring, 0) == 0;
        t_ring.owner = me;
        t_ring.window_in_flight = false;
        t_ring.scratch = nullptr;
      }
      const uint64_t w = ReadaheadBytes(*Get());
      if (!map) map = InPlaceMap(partition, &map_size);
      if (map) t_cold_probes = kColdProbes;  // (the next reads ask mincore first)
      if (w && map && !windowed && HugeWindow(map, map_size, off + done)) {
        windowed = true;
        continue;  // cached now: the copy above
      }
      if (w) {  // bring in the members around it too
        const uint64_t at_off = (off + done) / w * w;
        if (!StartWindowRead(fd, at_off, w))
          base::RawSyscall6(SYS_fadvise64, fd, static_cast<long>(at_off), static_cast<long>(w),
                            POSIX_FADV_WILLNEED);
      }
      if (t_ring.ok) {
        io_uring_sqe* sqe = io_uring_get_sqe(&t_ring.ring);
        io_uring_prep_read(sqe, fd, at, static_cast<unsigned>(want), off + done);
        io_uring_sqe_set_data64(sqe, 0);
        io_uring_cqe* cqe = nullptr;
        int rc = io_uring_submit(&t_ring.ring);
        for (;;) {  // the member's completion; a window read's may come first
          if (rc >= 0) rc = io_uring_wait_cqe(&t_ring.ring, &cqe);
          if (rc == -EINTR) {
            rc = 0;
            continue;
          }
          if (rc < 0) {
            // The ring is left alone from here on: what it still holds never runs again.
            t_ring.ok = false;
            return rc;
          }
          const bool window = io_uring_cqe_get_data64(cqe) == kWindowTag;
          if (!window) n = cqe->res;
          io_uring_cqe_seen(&t_ring.ring, cqe);
          if (!window) break;
          t_ring.window_in_flight = false;
        }
      } else {
        n = base::RawSyscall6(SYS_pread64, fd, reinterpret_cast<long>(at), static_cast<long>(want),
                              static_cast<long>(off + done));
      }
    }
    if (n == -EINTR || n == -EAGAIN) continue;
    if (n < 0) return n;
    if (n == 0) return -EIO;  // the blob is shorter than its index says
    if (into != at) {
      std::memcpy(at, into, static_cast<size_t>(n));
      if (!staged) g_io.realigned.Add(1);  // (one count per read, as CopyOut's)
      staged = true;
    }
    done += static_cast<size_t>(n);
  }
  return static_cast<long>(done);
}

void CopyOut(void* dst, const void* src, size_t n) {
  auto* to = static_cast<uint8_t*>(dst);
  const auto* from = static_cast<const uint8_t*>(src);
  uint8_t* area =
      base::CopyAliases(to, reinterpret_cast<uintptr_t>(from), n) ? StagingArea() : nullptr;
  if (!area) {
    std::memcpy(to, from, n);
    return;
  }
  g_io.realigned.Add(1);
  for (size_t done = 0; done < n;) {
    const size_t take = std::min(n - done, kStagingPiece);
    uint8_t* stage = base::StagingFor(area, to + done);
    std::memcpy(stage, from + done, take);
    std::memcpy(to + done, stage, take);
    done += take;
  }
}

}  // namespace fanstore::runtime
