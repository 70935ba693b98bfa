// Whether bytes of a mapped file can be copied without waiting on the device or faulting
// past its end: every page of [off, off + len) must be in the page cache (mincore). Shared
// by the runtime's member reads (raw system calls) and the agent's replies (libc), which
// pass their own mincore.
// Thread-safety: the functions are pure; ReuseTrust says its own.
#pragma once

#include <linux/magic.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "base/page_size.h"

namespace fanstore::io {

// The smallest page size: a vector sized by it has room for any kernel's pages (mincore's
// are the kernel's, base::PageSize(): 4 KiB here, up to 64 KiB on aarch64).
inline constexpr uint64_t kMinPage = 4096;

// A blob fanrun staged (its own copy, which nothing cuts short) on tmpfs (`fs_type`, from
// fstatfs): its pages are never read from a device and never go past its end, so bytes in
// its bounds are copied from the mapping without asking mincore. (On a node with swap, a
// page swapped out is brought back in by the copy: a wait, never a fault past the end.)
// The agent and the runtime both apply it.
inline bool AlwaysResident(bool staged, long fs_type) {
  return staged && fs_type == TMPFS_MAGIC;
}

// Pages that [off, off + len) spans (the size of the vector mincore fills).
inline uint64_t SpannedPages(uint64_t off, uint64_t len) {
  const uint64_t page = base::PageSize();
  const uint64_t first = off / page * page;
  return (off + len - first + page - 1) / page;
}

// `map` + `off` if the mapping of `map_bytes` holds [off, off + len) and every page of it is
// resident (`always`: the blob is AlwaysResident, mincore is not asked), else nullptr. `vec`
// has room for SpannedPages(off, len) bytes; mincore(addr, bytes, vec) returns 0 on success.
template <class Mincore>
const uint8_t* ResidentBytes(const uint8_t* map, uint64_t map_bytes, uint64_t off, uint64_t len,
                             bool always, unsigned char* vec, Mincore mincore) {
  if (!map || len == 0 || off > map_bytes || len > map_bytes - off) return nullptr;
  if (always) return map + off;
  const uint64_t page = base::PageSize();
  const uint64_t first = off / page * page;
  const uint64_t pages = SpannedPages(off, len);
  if (mincore(map + first, pages * page, vec) != 0) return nullptr;
  for (uint64_t i = 0; i < pages; ++i)
    if (!(vec[i] & 1)) return nullptr;
  return map + off;
}

// When a member a process has read before may be copied from its page-cached blob's
// mapping without asking mincore (runtime/data/member_io.cc). mincore costs ~1 us on this VM,
// a tenth of a warm 85 KiB read, and two things can make the copy go wrong without it: a
// page evicted since (the copy then waits on a page fault: slower, never wrong) and a blob
// cut short while mapped (the copy would fault with SIGBUS). So a check runs at most once
// per `check_ns` (the first caller past the period runs it): the caller compares the
// blobs' sizes with their mappings and reports the process's major faults here. Trust holds
// while no major fault was seen in the last `pause_ns`; a fault count that went down (a
// fork child's count starts over) is a new baseline, one that cannot be read (-1) pauses.
// Thread-safe: of racing callers, one runs each check; the others go on with the last result.
class ReuseTrust {
 public:
  ReuseTrust(int64_t check_ns, int64_t pause_ns) : check_ns_(check_ns), pause_ns_(pause_ns) {}

  // True for the one caller that is to run the check due at `now_ns`.
  bool CheckDue(int64_t now_ns) {
    int64_t next = next_check_.load(std::memory_order_relaxed);
    return now_ns >= next &&
           next_check_.compare_exchange_strong(next, now_ns + check_ns_, std::memory_order_relaxed);
  }

  // The check's result: the process's major faults so far (-1: unknown).
  void Checked(int64_t now_ns, int64_t major_faults) {
    const int64_t before = faults_.exchange(major_faults, std::memory_order_relaxed);
    if (major_faults < 0 || (before >= 0 && major_faults > before))
      paused_until_.store(now_ns + pause_ns_, std::memory_order_relaxed);
  }

  // Whether a check has run and no pause is in force at `now_ns`.
  bool Trusted(int64_t now_ns) const {
    return faults_.load(std::memory_order_relaxed) >= 0 &&
           now_ns >= paused_until_.load(std::memory_order_relaxed);
  }

 private:
  const int64_t check_ns_, pause_ns_;
  std::atomic<int64_t> next_check_{0};
  std::atomic<int64_t> paused_until_{0};
  std::atomic<int64_t> faults_{-1};
};

}  // namespace fanstore::io
