#include "runtime/member_io.h"

#include <fcntl.h>
#include <liburing.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>  // std::lock_guard
#include <new>
#include <vector>

#include "compress/crc32c.h"
#include "compress/inflate.h"
#include "intercept/preload_log.h"
#include "intercept/raw_syscall.h"
#include "io/mapped_copies.h"
#include "io/pieces.h"
#include "io/resident.h"
#include "meta/blocks.h"
#include "meta/format.h"
#include "runtime/counter.h"
#include "runtime/remote.h"
#include "runtime/state.h"

namespace fanstore::runtime {
namespace {

using meta::Codec;
using meta::ImageEntry;

constexpr uint64_t kCacheMax = 8ull << 20;  // members up to this size may be cached whole
// A partial read of a raw member at least this long, or one that reaches the member's end,
// is read straight from the blob into the caller's buffer (ReadRange): loading the whole
// member into the cache pays only for a reader that takes it in small pieces (PIL through
// an 8 KiB BufferedReader), and a fresh buffer of a few hundred KiB costs as many page
// faults as the read (fsbench's 256 KiB reads of larger members: 2,800 faults per 11,000
// files).
constexpr size_t kDirectRead = 64u << 10;
constexpr int kCacheSlots = 16;
// The cache's bytes at most (beyond the member just put): a large compressed member is
// held whole for its partial reads, and 16 of them must not take the node's memory.
constexpr uint64_t kCacheBytes = 256ull << 20;

ShardedCounter s_reads, s_bytes, s_inflates, s_inflate_ns, s_hits, s_errors, s_remote, s_device,
    s_mapped, s_trusted, s_arena;

// A read whose node-cache bytes were evicted while it used them: it is made again.
constexpr long kStale = -ESTALE;
constexpr int kAttempts = 4;  // the last one asks the agent for a private copy

bool SourceStill(const MemberSource& src) {
  return !src.bytes || RemoteStill(src.entry, src.word);
}

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
      intercept::RawSyscall6(SYS_munmap, reinterpret_cast<long>(scratch), kScratchBytes);
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
      if (!p.empty() && intercept::RawSyscall6(SYS_stat, reinterpret_cast<long>(p.c_str()),
                                               reinterpret_cast<long>(&st)) == 0)
        local += static_cast<uint64_t>(st.st_size);
    }
    struct sysinfo si;
    const bool known = intercept::RawSyscall6(SYS_sysinfo, reinterpret_cast<long>(&si)) == 0;
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
    const long m = intercept::RawSyscall6(SYS_mmap, 0, Ring::kScratchBytes, PROT_READ | PROT_WRITE,
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

long PreadBlob(int fd, void* buf, size_t len, uint64_t off) {
  const bool known = fd >= 0 && fd < (1 << 16);
  std::atomic<uint64_t>* word = known ? &s_no_nowait[fd / 64] : nullptr;
  const uint64_t bit = uint64_t{1} << (fd & 63);
  size_t done = 0;
  while (done < len) {
    char* at = static_cast<char*>(buf) + done;
    const size_t want = std::min<size_t>(len - done, 1u << 30);
    iovec iov{at, want};
    const bool skip = word && (word->load(std::memory_order_relaxed) & bit);
    long n = skip ? -EOPNOTSUPP
                  : intercept::RawSyscall6(SYS_preadv2, fd, reinterpret_cast<long>(&iov), 1,
                                           static_cast<long>(off + done), 0, RWF_NOWAIT);
    if (n == -EOPNOTSUPP) {
      if (word && !skip) word->fetch_or(bit, std::memory_order_relaxed);
      n = intercept::RawSyscall6(SYS_pread64, fd, reinterpret_cast<long>(at),
                                 static_cast<long>(want), static_cast<long>(off + done));
    } else if (n == -EAGAIN) {  // not in the page cache: the device read goes through io_uring
      s_device.Add(1);
      const pid_t me = Get()->pid.load(std::memory_order_relaxed);
      if (t_ring.owner != me) {  // a new thread, or a fork child (the parent's ring is not its own)
        t_ring.ok = io_uring_queue_init(8, &t_ring.ring, 0) == 0;
        t_ring.owner = me;
        t_ring.window_in_flight = false;
        t_ring.scratch = nullptr;
      }
      if (const uint64_t w = ReadaheadBytes(*Get())) {  // bring in the members around it too
        const uint64_t at_off = (off + done) / w * w;
        if (!StartWindowRead(fd, at_off, w))
          intercept::RawSyscall6(SYS_fadvise64, fd, static_cast<long>(at_off), static_cast<long>(w),
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
        n = intercept::RawSyscall6(SYS_pread64, fd, reinterpret_cast<long>(at),
                                   static_cast<long>(want), static_cast<long>(off + done));
      }
    }
    if (n == -EINTR || n == -EAGAIN) continue;
    if (n < 0) return n;
    if (n == 0) return -EIO;  // the blob is shorter than its index says
    done += static_cast<size_t>(n);
  }
  return static_cast<long>(done);
}

// Page-cached blob bytes are copied from a mapping of the blob instead: a memcpy from
// mapped page-cache pages costs ~6.5-7 us for 85 KiB where pread takes ~11 us (the kernel's
// per-page copy loop; measured, docs/design.md). mincore() tells whether every page is
// cached: if one is not, the bytes are read (through io_uring), so a cold read never waits
// on a page fault, and a blob shorter than its index (pages past its end are never
// resident) gets EIO, not SIGBUS. A member this process read before skips mincore under
// a periodic check instead (TrustReRead below). Members over 4 MiB take the read path (the
// copy dominates there).
constexpr size_t kViewMax = 4u << 20;

// The first read of a member in a process is a read, not a copy from the mapping, where
// the blob's pages must be checked with mincore (a blob in the page cache, not one of
// fanrun's staged tmpfs copies): in a new process, which has no page-table entries for the
// blob, mincore looks every page up in the page cache and the copy then faults each in;
// the kernel's copy is cheaper. A DataLoader worker started for each epoch reads each
// member once, so all its reads stay reads; a member read again in the same process is
// copied from the mapping, its pages then mapped once for the reads after. (New process,
// 22,000 files of 85 KiB in ext4's page cache: 68-77 k files/s against 38-63 k. Staged
// blobs need no mincore, and there the mapping wins from the first read: 144-146 k against
// 106-110 k; docs/design.md.) One bit per entry, in anonymous memory made on first use
// (untouched pages cost nothing) and cleared in a fork child, which inherits the bits but
// not the parent's page-table entries of the shared mapping.
std::atomic<std::atomic<uint64_t>*> s_read_before{nullptr};

size_t ReadBeforeBytes(const State& s) {
  return (s.ns.size() + 63) / 64 * 8;
}

// A per-process bitmap of `bytes` bytes in anonymous memory, made on first use (untouched
// pages cost nothing): nullptr when there is no memory for it.
std::atomic<uint64_t>* LazyBits(std::atomic<std::atomic<uint64_t>*>& slot, size_t bytes) {
  std::atomic<uint64_t>* bits = slot.load(std::memory_order_acquire);
  if (bits) return bits;
  const long m =
      intercept::RawSyscall6(SYS_mmap, 0, static_cast<long>(bytes), PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m < 0) return nullptr;
  auto* fresh = reinterpret_cast<std::atomic<uint64_t>*>(m);
  if (slot.compare_exchange_strong(bits, fresh, std::memory_order_acq_rel)) return fresh;
  intercept::RawSyscall6(SYS_munmap, m, static_cast<long>(bytes));  // another thread won
  return bits;
}

// Sets bit i; true when it was set already. A plain load first: re-reads (the common case
// once warm) write nothing, so threads reading neighbouring bits do not pass the bitmap's
// lines back and forth.
bool TestAndSet(std::atomic<uint64_t>* bits, uint64_t i) {
  const uint64_t bit = uint64_t{1} << (i % 64);
  std::atomic<uint64_t>& word = bits[i / 64];
  if (word.load(std::memory_order_relaxed) & bit) return true;
  return word.fetch_or(bit, std::memory_order_relaxed) & bit;
}

// Marks `entry` read in this process; true when it was already.
bool ReadBefore(const State& s, uint32_t entry) {
  std::atomic<uint64_t>* bits = LazyBits(s_read_before, ReadBeforeBytes(s));
  if (!bits) return true;  // no memory for the bits: every read may take the mapping
  return TestAndSet(bits, entry);
}

// A member read before in this process was in the page cache then: it is copied from the
// mapping without asking mincore while io::ReuseTrust holds (io/resident.h). Every 100 ms
// one reader compares the mapped blobs' sizes with their mappings (a blob cut short gets
// its new bounds, so reads past its end go to pread and EIO instead of SIGBUS) and reads the
// process's major faults (one means pages are being evicted: mincore again for 5 s). A cut
// in the 100 ms before such a copy can still fault; docs/design.md has the measurements.
io::ReuseTrust s_trust(100'000'000, 5'000'000'000);

bool TrustReRead(State& s) {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &t);  // the vDSO: no system call, 4 ms resolution
  const int64_t now = t.tv_sec * 1'000'000'000 + t.tv_nsec;
  if (s_trust.CheckDue(now)) {
    s.ShrinkCutBlobs();
    struct rusage ru;
    const long rc = intercept::RawSyscall6(SYS_getrusage, RUSAGE_SELF, reinterpret_cast<long>(&ru));
    s_trust.Checked(now, rc == 0 ? ru.ru_majflt : -1);
  }
  return s_trust.Trusted(now);
}

// Short ranges of large members (a reader at random offsets of an HDF5 or LMDB file) in a
// blob that needs the page check (not a staged copy) take the same first-read rule by
// 64 KiB region of the blob: the first read of a region in a process is a read (no mincore,
// no page fault), a read of a region read before is copied from the mapping, without
// mincore while ReuseTrust holds. (On staged tmpfs copies a first read costs the same
// either way, and the mapping wins every re-read: they keep it; docs/design.md.)
// One bit per region, hashed with its partition into a fixed 2 MiB of anonymous memory
// (untouched pages cost nothing): a collision only makes a first read take the mapping.
// Cleared in a fork child, as ReadBefore's bits are.
constexpr size_t kRegionRuleMax = 64u << 10;  // ranges up to this long take the region rule
constexpr int kRegionShift = 16;
constexpr int kRegionBitsLog2 = 24;
constexpr uint64_t kRegionBits = uint64_t{1} << kRegionBitsLog2;
std::atomic<std::atomic<uint64_t>*> s_region_bits{nullptr};

// Marks the regions of blob bytes [off, off + len) of `partition` read in this process;
// true when all of them were already.
bool RegionsReadBefore(uint32_t partition, uint64_t off, size_t len) {
  std::atomic<uint64_t>* bits = LazyBits(s_region_bits, kRegionBits / 8);
  if (!bits) return true;  // no memory for the bits: reads take the mapping, as before
  bool all = true;
  for (uint64_t r = off >> kRegionShift; r <= (off + len - 1) >> kRegionShift; ++r)
    all &= TestAndSet(
        bits, ((uint64_t{partition} << 40 ^ r) * 0x9E3779B97F4A7C15ull) >> (64 - kRegionBitsLog2));
  return all;
}

// `entry`: the member whose bytes these are, for the first-read rule above (kNoEntry: a
// range of a large member, copied from the mapping when cached; `range_read_before`: that
// range was read before in this process, so it may skip mincore as a member's re-read does).
const uint8_t* ResidentView(State& s, uint32_t partition, uint64_t off, size_t len, uint32_t entry,
                            bool range_read_before = false) {
  if (len == 0 || len > kViewMax || !s.mapped_reads) return nullptr;
  uint64_t size = 0;
  bool resident = false;
  const uint8_t* map = s.BlobMap(partition, &size, &resident);
  bool read_before = range_read_before;
  if (!resident && entry != meta::kNoEntry) {
    read_before = ReadBefore(s, entry);
    if (!read_before) return nullptr;
  }
  const bool trusted = !resident && read_before && map && TrustReRead(s);
  if (trusted) size = s.blob_sizes[partition].load(std::memory_order_relaxed);  // after the check
  unsigned char vec[kViewMax / io::kResidentPage + 2];
  const uint8_t* view = io::ResidentBytes(map, size, off, len, resident || trusted, vec,
                                          [](const uint8_t* at, uint64_t n, unsigned char* v) {
                                            return intercept::RawSyscall6(
                                                SYS_mincore, reinterpret_cast<long>(at),
                                                static_cast<long>(n), reinterpret_cast<long>(v));
                                          });
  if (view) {
    s_mapped.Add(1);
    if (trusted) s_trusted.Add(1);
  }
  return view;
}

constexpr uint64_t kNoBlock = ~uint64_t{0};

long Damaged(const State& s, const ImageEntry& e, const char* why, uint64_t block = kNoBlock) {
  s_errors.Add(1);
  const std::string& where = s.parts[e.partition];
  const char* from = where.empty() ? "fetched from another node" : where.c_str();
  if (block == kNoBlock)
    intercept::Logger().error("{}: member '{}': {}", from, s.ns.path(e), why);
  else
    intercept::Logger().error("{}: member '{}': {} in block {}", from, s.ns.path(e), why, block);
  return -EIO;
}

struct Closer {
  const MemberSource& s;
  ~Closer() { CloseSource(s); }
};

// Stored bytes [off, off + len) of a pieced remote member into `dst`: each piece they touch
// from the node cache, or fetched into it by the agent (a piece evicted while it was copied
// is copied again; the last attempt asks for a private copy). len or a negative errno.
long ReadPieces(const ImageEntry& e, uint32_t entry, uint64_t off, size_t len, uint8_t* dst) {
  size_t done = 0;
  while (done < len) {
    const uint64_t pos = off + done, p = pos / io::kPieceBytes, in = pos - io::PieceOffset(p);
    const size_t take =
        static_cast<size_t>(std::min<uint64_t>(len - done, io::PieceLength(e.stored_size, p) - in));
    long r = kStale;
    for (int i = 0; r == kStale && i < kAttempts; ++i) {
      RemoteSource src;
      if (const long rc = FetchRemotePiece(entry, p, i == kAttempts - 1, &src); rc < 0) return rc;
      if (src.bytes) {
        s_arena.Add(1);
        std::memcpy(dst + done, src.bytes + in, take);
        r = RemoteStill(RemotePieceKey(entry, p), src.word) ? static_cast<long>(take) : kStale;
      } else {
        r = PreadBlob(src.fd, dst + done, take, in);
        intercept::RawSyscall6(SYS_close, src.fd);
      }
    }
    if (r < 0) return r == kStale ? -EIO : r;
    done += take;
  }
  return static_cast<long>(len);
}

// Stored bytes [off, off + len) of the member behind `src`: a view of the node cache or of
// the blob's mapping when they are there, else read into `buf` (len bytes). nullptr with
// *err set when the read fails.
const uint8_t* StoredBytes(State& s, const MemberSource& src, const ImageEntry& e, uint64_t off,
                           size_t len, uint8_t* buf, long* err) {
  if (src.bytes) return src.bytes + off;
  if (src.pieced) {
    const long n = ReadPieces(e, src.entry, off, len, buf);
    if (n < 0) *err = n;
    return n < 0 ? nullptr : buf;
  }
  if (!src.owned)
    if (const uint8_t* v = ResidentView(s, e.partition, src.base + off, len, meta::kNoEntry))
      return v;
  const long n = PreadBlob(src.fd, buf, len, src.base + off);
  if (n < 0) {
    *err = n;
    return nullptr;
  }
  return buf;
}

long InflateTimed(std::span<const uint8_t> in, std::span<uint8_t> out) {
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = compress::InflateExact(in, out);
  s_inflates.Add(1);
  s_inflate_ns.Add(static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count()));
  return rc;
}

// Block b of a block-deflated member (meta/blocks.h), inflated and checked, into `out`
// (BlockPlainBytes long). Reads the trailer and b's table entry, then b's stream only.
// kStale, and no damage logged, when node-cache bytes were evicted while in use.
long LoadBlock(State& s, const MemberSource& src, const ImageEntry& e, uint64_t b, uint8_t* out) {
  auto damaged = [&](const char* why, uint64_t block) {
    return SourceStill(src) ? Damaged(s, e, why, block) : kStale;
  };
  long err = 0;
  uint8_t tail_buf[meta::kBlockTrailerBytes], entry_buf[meta::kBlockEntryBytes];
  if (e.stored_size < sizeof tail_buf)
    return damaged("damaged compressed data (block trailer)", kNoBlock);
  const uint8_t* tail =
      StoredBytes(s, src, e, e.stored_size - sizeof tail_buf, sizeof tail_buf, tail_buf, &err);
  if (!tail) return err;
  meta::BlockTrailer t;
  if (!meta::DecodeBlockTrailer(tail, e.size, e.stored_size, &t) || b >= t.count)
    return damaged("damaged compressed data (block trailer)", kNoBlock);
  const uint8_t* at = StoredBytes(s, src, e, t.table_offset + b * meta::kBlockEntryBytes,
                                  sizeof entry_buf, entry_buf, &err);
  if (!at) return err;
  meta::BlockEntry be;
  if (!meta::DecodeBlockEntry(at, t, &be)) return damaged("damaged block table entry", b);
  std::unique_ptr<uint8_t[]> copy;
  const uint8_t* stored = src.bytes ? src.bytes + be.offset : nullptr;
  if (!stored) {
    copy.reset(new (std::nothrow) uint8_t[be.length]);
    if (!copy) return -ENOMEM;
    stored = StoredBytes(s, src, e, be.offset, be.length, copy.get(), &err);
    if (!stored) return err;
  }
  const size_t n = static_cast<size_t>(meta::BlockPlainBytes(e.size, b));
  if (InflateTimed({stored, be.length}, {out, n}) != 0)
    return damaged("damaged compressed data", b);
  if (compress::Crc32c(0, out, n) != be.crc32c)
    return damaged("checksum mismatch (damaged data)", b);
  return static_cast<long>(n);
}

// The whole (uncompressed, verified) bytes of a member into `out`; kStale when node-cache
// bytes were evicted while in use.
long LoadOnce(State& s, uint32_t entry, uint8_t* out, bool want_fd) {
  const ImageEntry& e = s.ns.entry(entry);
  MemberSource src;
  if (const long rc = OpenSource(entry, &src, want_fd); rc < 0) return rc;
  Closer closer{src};
  if (e.codec == static_cast<uint8_t>(Codec::kDeflateBlocks)) {
    for (uint64_t b = 0; b < meta::BlockCount(e.size); ++b)
      if (const long rc = LoadBlock(s, src, e, b, out + b * meta::kDeflateBlockBytes); rc < 0)
        return rc;
    if (!SourceStill(src)) return kStale;
    if (compress::Crc32c(0, out, e.size) != e.crc32c)
      return Damaged(s, e, "checksum mismatch (damaged data)");
    return static_cast<long>(e.size);
  }
  const int fd = src.fd;
  const uint8_t* view = src.bytes ? src.bytes
                        : src.owned || src.pieced
                            ? nullptr
                            : ResidentView(s, e.partition, src.base, e.stored_size, entry);
  if (e.codec == static_cast<uint8_t>(Codec::kRaw)) {
    long n;
    if (view) {
      std::memcpy(out, view, e.size);
      n = static_cast<long>(e.size);
    } else if (src.pieced) {
      n = ReadPieces(e, entry, 0, e.size, out);
    } else {
      n = PreadBlob(fd, out, e.size, src.base);
    }
    if (n < 0) return n;
    if (!SourceStill(src)) return kStale;
    if (s.verify_raw && compress::Crc32c(0, out, e.size) != e.crc32c)
      return Damaged(s, e, "checksum mismatch (damaged data)");
    return n;
  }
  // Compressed: inflated straight from the mapping when cached, else from a read copy.
  std::unique_ptr<uint8_t[]> stored;
  if (!view) {
    stored.reset(new (std::nothrow) uint8_t[e.stored_size]);
    if (!stored) return -ENOMEM;
    const long n = src.pieced ? ReadPieces(e, entry, 0, e.stored_size, stored.get())
                              : PreadBlob(fd, stored.get(), e.stored_size, src.base);
    if (n < 0) return n;
    view = stored.get();
  }
  const long rc = InflateTimed({view, e.stored_size}, {out, e.size});
  if (!SourceStill(src)) return kStale;
  if (rc != 0) return Damaged(s, e, "damaged compressed data");
  if (compress::Crc32c(0, out, e.size) != e.crc32c)
    return Damaged(s, e, "checksum mismatch (damaged data)");
  return static_cast<long>(e.size);
}

long LoadWhole(State& s, uint32_t entry, uint8_t* out) {
  long rc = kStale;
  for (int i = 0; rc == kStale && i < kAttempts; ++i)
    rc = LoadOnce(s, entry, out, i == kAttempts - 1);
  return rc == kStale ? -EIO : rc;
}

// Bytes [off, off + n) of a large raw member, read directly.
long ReadRange(State& s, uint32_t entry, uint64_t off, void* dst, size_t n) {
  const ImageEntry& e = s.ns.entry(entry);
  long r = kStale;
  for (int i = 0; r == kStale && i < kAttempts; ++i) {
    MemberSource src;
    if (const long rc = OpenSource(entry, &src, i == kAttempts - 1); rc < 0) return rc;
    Closer closer{src};
    // (a short range of a blob that needs the page check: the region rule above; a staged
    // one, or a long range: the mapping when cached)
    const bool blob = !src.bytes && !src.owned && !src.pieced && s.mapped_reads;
    uint64_t blob_size = 0;
    bool resident = false;
    const bool region_rule =
        blob && n <= kRegionRuleMax && s.BlobMap(e.partition, &blob_size, &resident) && !resident;
    const bool before = region_rule && RegionsReadBefore(e.partition, src.base + off, n);
    const uint8_t* view = nullptr;
    if (src.bytes)
      view = src.bytes + off;
    else if (blob && (!region_rule || before))
      view = ResidentView(s, e.partition, src.base + off, n, meta::kNoEntry, before);
    if (view) {
      std::memcpy(dst, view, n);
      r = SourceStill(src) ? static_cast<long>(n) : kStale;
    } else if (src.pieced) {
      r = ReadPieces(e, entry, off, n, static_cast<uint8_t*>(dst));
    } else {
      r = PreadBlob(src.fd, dst, n, src.base + off);
    }
  }
  return r == kStale ? -EIO : r;
}

// A spinlock, not a pthread mutex: the hook runs inside arbitrary applications (under
// ThreadSanitizer too, which intercepts pthread locks it did not see initialised), and the
// critical sections are a scan of 16 slots with no allocation or system call.
class SpinLock {
 public:
  void lock() {
    while (flag_.test_and_set(std::memory_order_acquire)) __builtin_ia32_pause();
  }
  void unlock() { flag_.clear(std::memory_order_release); }

 private:
  std::atomic_flag flag_ = ATOMIC_FLAG_INIT;
};

// Keys: a whole member, or one block of a block-deflated member.
constexpr uint64_t kWholeMember = 0xFFFFFFFF;
constexpr uint64_t kNoKey = ~uint64_t{0};
uint64_t CacheKey(uint32_t entry, uint64_t block) {
  return uint64_t{entry} << 32 | block;
}

// A member's bytes in the cache. Not zeroed when made: every byte is written by the load
// before anyone reads it, and zeroing a fresh 300 KiB buffer (with its page faults) cost
// more than the read itself (`fsbench` reads of members larger than its 256 KiB buffer).
template <typename T>
struct NoInit : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = NoInit<U>;
  };
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... A>
  void construct(U* p, A&&... a) {
    ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
  }
};
using Bytes = std::vector<uint8_t, NoInit<uint8_t>>;

struct Cache {
  SpinLock mu;
  struct Slot {
    uint64_t key = kNoKey;
    uint64_t tick = 0;
    std::shared_ptr<Bytes> data;
  } slots[kCacheSlots];
  uint64_t tick = 0;

  std::shared_ptr<Bytes> Find(uint64_t key) {
    std::lock_guard<SpinLock> lk(mu);
    for (auto& sl : slots)
      if (sl.key == key) {
        sl.tick = ++tick;
        return sl.data;
      }
    return nullptr;
  }
  void Put(uint64_t key, std::shared_ptr<Bytes> d) {
    std::shared_ptr<Bytes> evicted[kCacheSlots];  // released after the lock
    int n_evicted = 0;
    std::lock_guard<SpinLock> lk(mu);
    Slot* victim = &slots[0];
    for (auto& sl : slots)
      if (sl.tick < victim->tick) victim = &sl;
    bytes -= victim->data ? victim->data->size() : 0;
    bytes += d->size();
    victim->key = key;
    victim->tick = ++tick;
    evicted[n_evicted++] = std::move(victim->data);
    victim->data = std::move(d);
    // Then the least recently used others, while over the byte bound.
    while (bytes > victim->data->size() + kCacheBytes) {
      Slot* old = nullptr;
      for (auto& sl : slots)
        if (sl.data && &sl != victim && (!old || sl.tick < old->tick)) old = &sl;
      if (!old) break;
      bytes -= old->data->size();
      old->key = kNoKey;
      evicted[n_evicted++] = std::move(old->data);
    }
  }
  uint64_t bytes = 0;  // held in the slots
};
Cache& TheCache() {
  static Cache* c = new Cache();
  return *c;
}

std::shared_ptr<Bytes> NewBuffer(uint64_t n) {
  try {  // the hook runs inside the application: no exception may leave it
    return std::make_shared<Bytes>(n);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}

// Bytes [off, off + n) of a block-deflated member: each block they touch is inflated once
// into the cache (a reader going through the member in 128 KiB reads inflates each block
// once), the others not at all.
long ReadBlocks(State& s, uint32_t entry, uint64_t off, void* dst, size_t n) {
  const ImageEntry& e = s.ns.entry(entry);
  size_t done = 0;
  while (done < n) {
    const uint64_t pos = off + done, b = pos / meta::kDeflateBlockBytes;
    auto data = TheCache().Find(CacheKey(entry, b));
    if (data) {
      s_hits.Add(1);
    } else {
      data = NewBuffer(meta::BlockPlainBytes(e.size, b));
      if (!data) return -ENOMEM;
      long r = kStale;
      for (int i = 0; r == kStale && i < kAttempts; ++i) {
        MemberSource src;
        if (const long rc = OpenSource(entry, &src, i == kAttempts - 1); rc < 0) return rc;
        Closer closer{src};
        r = LoadBlock(s, src, e, b, data->data());
        if (!SourceStill(src)) r = kStale;
      }
      if (r < 0) return r == kStale ? -EIO : r;
      TheCache().Put(CacheKey(entry, b), data);
    }
    const uint64_t in = pos - b * meta::kDeflateBlockBytes;
    const size_t take = static_cast<size_t>(std::min<uint64_t>(n - done, data->size() - in));
    std::memcpy(static_cast<uint8_t*>(dst) + done, data->data() + in, take);
    done += take;
  }
  return static_cast<long>(n);
}

}  // namespace

long OpenSource(uint32_t entry, MemberSource* out, bool want_fd) {
  State& s = *Get();
  const ImageEntry& e = s.ns.entry(entry);
  if (!s.parts[e.partition].empty()) {
    const int fd = s.BlobFd(e.partition);
    if (fd < 0) return fd;
    *out = MemberSource{fd, e.data_offset, false};
    return 0;
  }
  s_remote.Add(1);
  if (!want_fd && RemotePieced(entry)) {  // fetched by the piece as it is read
    *out = MemberSource{-1, 0, false, nullptr, 0, entry, true};
    return 0;
  }
  RemoteSource r;
  if (const long rc = FetchRemote(entry, want_fd, &r); rc < 0) return rc;
  if (r.bytes) {
    s_arena.Add(1);
    *out = MemberSource{-1, 0, false, r.bytes, r.word, entry};
  } else {
    *out = MemberSource{r.fd, 0, true, nullptr, 0, entry};
  }
  return 0;
}

bool FetchedByPiece(uint32_t entry) {
  State& s = *Get();
  return s.parts[s.ns.entry(entry).partition].empty() && RemotePieced(entry);
}

namespace {

// Removes the node's mapped copies used least recently until `need` more bytes fit in
// `bound` (io/mapped_copies.h). Another process may remove the same copy at once, or one
// may appear meanwhile: the bound is kept as well as the directory shows it.
void MakeRoomForCopy(const std::string& dir, uint64_t need, uint64_t bound) {
  const long dfd = intercept::RawSyscall6(SYS_openat, AT_FDCWD, reinterpret_cast<long>(dir.c_str()),
                                          O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return;
  std::vector<std::string> names;
  std::vector<io::MappedCopy> copies;
  alignas(8) char buf[8192];
  for (;;) {
    const long n =
        intercept::RawSyscall6(SYS_getdents64, dfd, reinterpret_cast<long>(buf), sizeof buf);
    if (n <= 0) break;
    for (long at = 0; at < n;) {
      struct Dirent64 {
        uint64_t ino;
        int64_t off;
        unsigned short reclen;
        unsigned char type;
        char name[1];
      };
      const auto* d = reinterpret_cast<const Dirent64*>(buf + at);
      at += d->reclen;
      if (!io::IsMappedCopyName(d->name)) continue;
      struct stat st;
      if (intercept::RawSyscall6(SYS_newfstatat, dfd, reinterpret_cast<long>(d->name),
                                 reinterpret_cast<long>(&st), AT_SYMLINK_NOFOLLOW) != 0)
        continue;
      names.emplace_back(d->name);
      copies.push_back({static_cast<uint64_t>(st.st_size),
                        st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec});
    }
  }
  for (const size_t i : io::CopiesToRemove(copies, need, bound)) {
    intercept::RawSyscall6(SYS_unlinkat, dfd, reinterpret_cast<long>(names[i].c_str()), 0);
    intercept::Logger().debug("node cache: {}/{} removed ({} bytes): mapped copies within {} bytes",
                              dir, names[i], copies[i].bytes, bound);
  }
  intercept::RawSyscall6(SYS_close, dfd);
}

}  // namespace

long SharedCopyOf(uint32_t entry) {
  State& s = *Get();
  if (s.node_cache.empty()) return -ENOENT;
  const std::string path =
      s.node_cache + "/" + std::string(io::kMappedCopyPrefix) + std::to_string(entry);
  const long ro = intercept::RawSyscall6(SYS_openat, AT_FDCWD, reinterpret_cast<long>(path.c_str()),
                                         O_RDONLY | O_CLOEXEC);
  if (ro >= 0) {  // made before, whole (it is renamed into place only when complete)
    // used now: the last to be removed when room is made (utimensat(fd, NULL, NULL): now)
    intercept::RawSyscall6(SYS_utimensat, ro, 0, 0, 0);
    return ro;
  }
  const uint64_t size = s.ns.entry(entry).size;
  if (const uint64_t bound = NodeCacheBytes(); bound > 0)
    MakeRoomForCopy(s.node_cache, size, bound);
  // Made here under a name of this thread's own, then renamed into place: a process that
  // races us makes its own, the last rename wins, and both are the member's bytes.
  const std::string tmp = path + "." + std::to_string(intercept::RawSyscall6(SYS_gettid)) + ".tmp";
  const long fd = intercept::RawSyscall6(SYS_openat, AT_FDCWD, reinterpret_cast<long>(tmp.c_str()),
                                         O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0400);
  if (fd < 0) return fd;
  long rc = intercept::RawSyscall6(SYS_fallocate, fd, 0, 0, static_cast<long>(size));
  if (rc == -EOPNOTSUPP) rc = 0;  // (then a full disk shows in the writes)
  std::unique_ptr<uint8_t[]> buf(new (std::nothrow) uint8_t[io::kPieceBytes]);
  if (!buf && rc == 0) rc = -ENOMEM;
  for (uint64_t off = 0; rc == 0 && off < size;) {
    const ssize_t n = ReadMember(entry, off, buf.get(), io::kPieceBytes);
    if (n <= 0) {
      rc = n < 0 ? n : -EIO;
      break;
    }
    for (ssize_t w = 0; rc == 0 && w < n;) {
      const long k = intercept::RawSyscall6(SYS_pwrite64, fd, reinterpret_cast<long>(buf.get() + w),
                                            n - w, static_cast<long>(off + w));
      if (k < 0 && k != -EINTR) rc = k;
      w += k > 0 ? k : 0;
    }
    off += static_cast<uint64_t>(n);
  }
  // The read-only descriptor is opened before the rename: another process making room may
  // remove the name at any time after it.
  long ro_made = -1;
  if (rc == 0) {
    ro_made = intercept::RawSyscall6(SYS_openat, AT_FDCWD, reinterpret_cast<long>(tmp.c_str()),
                                     O_RDONLY | O_CLOEXEC);
    rc = ro_made < 0 ? ro_made : 0;
  }
  if (rc == 0)
    rc = intercept::RawSyscall6(SYS_rename, reinterpret_cast<long>(tmp.c_str()),
                                reinterpret_cast<long>(path.c_str()));
  intercept::RawSyscall6(SYS_close, fd);
  if (rc < 0) {
    if (ro_made >= 0) intercept::RawSyscall6(SYS_close, ro_made);
    intercept::RawSyscall6(SYS_unlink, reinterpret_cast<long>(tmp.c_str()));
    return rc;
  }
  return ro_made;
}

void CloseSource(const MemberSource& src) {
  if (src.owned && src.fd >= 0) intercept::RawSyscall6(SYS_close, src.fd);
}

ssize_t ReadMember(uint32_t entry, uint64_t off, void* dst, size_t len) {
  State& s = *Get();
  const ImageEntry& e = s.ns.entry(entry);
  if (off >= e.size || len == 0) return 0;
  const size_t n = static_cast<size_t>(std::min<uint64_t>(len, e.size - off));
  s_reads.Add(1);
  const bool raw = e.codec == static_cast<uint8_t>(Codec::kRaw);
  // The whole member in one read: straight into the caller's buffer.
  if (off == 0 && n == e.size) {
    const long r = LoadWhole(s, entry, static_cast<uint8_t*>(dst));
    if (r > 0) s_bytes.Add(static_cast<uint64_t>(r));
    return r;
  }
  // (FANSTORE_VERIFY=all checks a raw member whole: a cached load does)
  const bool direct = n >= kDirectRead || off + n == e.size;  // long, or the member's tail
  if ((raw && (e.size > kCacheMax || (direct && !s.verify_raw))) ||
      e.codec == static_cast<uint8_t>(Codec::kDeflateBlocks)) {
    // a raw member's long range, or a large one's: read directly; a block-deflated
    // member: its blocks
    const long r = raw ? ReadRange(s, entry, off, dst, n) : ReadBlocks(s, entry, off, dst, n);
    if (r > 0) s_bytes.Add(static_cast<uint64_t>(r));
    return r;
  }
  auto data = TheCache().Find(CacheKey(entry, kWholeMember));
  if (data) {
    s_hits.Add(1);
  } else {
    data = NewBuffer(e.size);
    if (!data) return -ENOMEM;
    const long r = LoadWhole(s, entry, data->data());
    if (r < 0) return r;
    TheCache().Put(CacheKey(entry, kWholeMember), data);
  }
  std::memcpy(dst, data->data() + off, n);
  s_bytes.Add(n);
  return static_cast<ssize_t>(n);
}

void MemberIoAfterFork() {
  if (std::atomic<uint64_t>* bits = s_read_before.load(std::memory_order_relaxed))
    intercept::RawSyscall6(SYS_madvise, reinterpret_cast<long>(bits),
                           static_cast<long>(ReadBeforeBytes(*Get())), MADV_DONTNEED);
  if (std::atomic<uint64_t>* bits = s_region_bits.load(std::memory_order_relaxed))
    intercept::RawSyscall6(SYS_madvise, reinterpret_cast<long>(bits),
                           static_cast<long>(kRegionBits / 8), MADV_DONTNEED);
}

IoStats SnapshotIoStats() {
  IoStats st{s_reads.Load(),      s_bytes.Load(), s_inflates.Load(),
             s_inflate_ns.Load(), s_hits.Load(),  s_errors.Load()};
  st.remote = s_remote.Load();
  st.device_reads = s_device.Load();
  st.mapped_reads = s_mapped.Load();
  st.trusted_reads = s_trusted.Load();
  st.node_cache_hits = s_arena.Load();
  return st;
}

}  // namespace fanstore::runtime
