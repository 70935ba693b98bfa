#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include <atomic>

#include "base/clock.h"
#include "base/raw_syscall.h"
#include "io/resident.h"
#include "runtime/data/member_io_parts.h"

namespace fanstore::runtime {
namespace {

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
  const long m = base::RawSyscall6(SYS_mmap, 0, static_cast<long>(bytes), PROT_READ | PROT_WRITE,
                                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m < 0) return nullptr;
  auto* fresh = reinterpret_cast<std::atomic<uint64_t>*>(m);
  if (slot.compare_exchange_strong(bits, fresh, std::memory_order_acq_rel)) return fresh;
  base::RawSyscall6(SYS_munmap, m, static_cast<long>(bytes));  // another thread won
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
  const int64_t now = base::CoarseMonotonicNs();
  if (s_trust.CheckDue(now)) {
    s.ShrinkCutBlobs();
    struct rusage ru;
    const long rc = base::RawSyscall6(SYS_getrusage, RUSAGE_SELF, reinterpret_cast<long>(&ru));
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
constexpr int kRegionShift = 16;
constexpr int kRegionBitsLog2 = 24;
constexpr uint64_t kRegionBits = uint64_t{1} << kRegionBitsLog2;
std::atomic<std::atomic<uint64_t>*> s_region_bits{nullptr};

}  // namespace

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

const uint8_t* ResidentView(State& s, uint32_t partition, uint64_t off, size_t len, uint32_t entry,
                            bool range_read_before) {
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
  unsigned char vec[kViewMax / io::kMinPage + 2];
  const uint8_t* view =
      io::ResidentBytes(map, size, off, len, resident || trusted, vec,
                        [](const uint8_t* at, uint64_t n, unsigned char* v) {
                          return base::RawSyscall6(SYS_mincore, reinterpret_cast<long>(at),
                                                   static_cast<long>(n), reinterpret_cast<long>(v));
                        });
  if (view) {
    g_io.mapped.Add(1);
    if (trusted) g_io.trusted.Add(1);
  }
  return view;
}

void ForgetReadsAfterFork() {
  if (std::atomic<uint64_t>* bits = s_read_before.load(std::memory_order_relaxed))
    base::RawSyscall6(SYS_madvise, reinterpret_cast<long>(bits),
                      static_cast<long>(ReadBeforeBytes(*Get())), MADV_DONTNEED);
  if (std::atomic<uint64_t>* bits = s_region_bits.load(std::memory_order_relaxed))
    base::RawSyscall6(SYS_madvise, reinterpret_cast<long>(bits), static_cast<long>(kRegionBits / 8),
                      MADV_DONTNEED);
}

}  // namespace fanstore::runtime
