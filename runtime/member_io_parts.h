// What the parts of member reading share, for runtime/member_io.cc and its parts only: the
// counters behind SnapshotIoStats, the blob reader (blob_read.cc), the rules for copying
// page-cached bytes from a mapping of the blob (residency.cc) and the per-process member
// cache (member_cache.cc). Other callers use runtime/member_io.h.
// Thread-safety: as member_io.h: any thread, never a vfork child.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "runtime/counter.h"
#include "runtime/state.h"

namespace fanstore::runtime {

struct IoCounters {
  ShardedCounter reads, bytes, inflates, inflate_ns, hits, errors, remote, device, mapped, trusted,
      arena;
};
extern IoCounters g_io;

// blob_read.cc: `len` bytes of blob `fd` at `off` into `buf`: copied by the kernel when they
// are in the page cache, else read through this thread's io_uring together with the
// readahead window around them. len, or a negative errno (EIO: the blob ends early).
long PreadBlob(int fd, void* buf, size_t len, uint64_t off);

// residency.cc: blob bytes [off, off + len) of `partition` as a view of the blob's mapping,
// when they are all in the page cache and copying them from there pays; else nullptr (the
// caller reads them). `entry`: the member they belong to, for the rule that a member's first
// read in a process is a read (kNoEntry: a range of a large member; `range_read_before`: the
// range's regions were read before in this process).
const uint8_t* ResidentView(State& s, uint32_t partition, uint64_t off, size_t len, uint32_t entry,
                            bool range_read_before = false);
// Ranges up to this long of a blob that needs the page check take the region rule.
inline constexpr size_t kRegionRuleMax = 64u << 10;
// Marks the 64 KiB regions of blob bytes [off, off + len) of `partition` read in this
// process; true when all of them were already.
bool RegionsReadBefore(uint32_t partition, uint64_t off, size_t len);
// In a fork child: which members and regions were read is the parent's, not the child's.
void ForgetReadsAfterFork();

// member_cache.cc: members (or blocks of block-deflated members) held for reads that take
// them in pieces. A buffer is not zeroed when made: every byte is written by the load before
// anyone reads it, and zeroing a fresh 300 KiB buffer (with its page faults) cost more than
// the read itself.
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
// Keys: a whole member, or one block of a block-deflated member.
inline constexpr uint64_t kWholeMember = 0xFFFFFFFF;
inline uint64_t CacheKey(uint32_t entry, uint64_t block) {
  return uint64_t{entry} << 32 | block;
}
std::shared_ptr<Bytes> CacheFind(uint64_t key);
void CachePut(uint64_t key, std::shared_ptr<Bytes> bytes);
// n bytes, or nullptr when there is no memory (no exception leaves the hook).
std::shared_ptr<Bytes> NewBuffer(uint64_t n);

}  // namespace fanstore::runtime
