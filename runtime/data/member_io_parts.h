// What the parts of member reading share, for runtime/data/member_io.cc and its parts only: the
// counters behind SnapshotIoStats, the loaders' helpers, block-deflated members
// (member_blocks.cc), the blob reader (blob_read.cc), the rules for copying
// page-cached bytes from a mapping of the blob (residency.cc) and the per-process member
// cache (member_cache.cc). Other callers use runtime/data/member_io.h.
// Thread-safety: as member_io.h: any thread, never a vfork child.
#pragma once

#include <sys/types.h>

#include <cerrno>
#include <cstdint>
#include <memory>
#include <new>
#include <span>
#include <utility>
#include <vector>

#include "runtime/process/counter.h"
#include "runtime/process/state.h"

namespace fanstore::runtime {

struct IoCounters {
  ShardedCounter reads, bytes, inflates, inflate_ns, hits, errors, remote, device, mapped, trusted,
      arena, raw_checks, landed, landing_waits, landing_gave_up, realigned;
};
extern IoCounters g_io;

// landing_read.cc: `len` bytes of partition p at `off` while fanrun copies it (State::
// BlobSettled is false): from the copy once the chunks they lie in have landed; chunks not
// landed yet are asked for (the copier takes them next) and waited for while the copier
// lands anything (io::LandingPatience). kNotLanded when the chunks landed in DATA's page
// cache (the copier fetches first), the copy was given up or is stuck, or there is no landing
// map: the caller reads DATA.
inline constexpr long kNotLanded = -(1l << 20);
long ReadLanded(State& s, uint32_t p, void* buf, size_t len, uint64_t off);

// blob_read.cc: `len` bytes of blob `fd` at `off` into `buf`: copied by the kernel when they
// are in the page cache (through this thread's staging area when the copy would alias,
// base/copy_alias.h), else read through this thread's io_uring together with the
// readahead window around them. len, or a negative errno (EIO: the blob ends early).
// `partition`, when given, is the blob's (an in-place blob: `fd` is State::BlobFd's): a
// device read then brings in the 2 MiB around `off` through the blob's mapping as one huge
// folio (HugeWindow), where the readahead rule reads ahead at all.
inline constexpr uint32_t kNoPartition = ~uint32_t{0};
long PreadBlob(int fd, void* buf, size_t len, uint64_t off, uint32_t partition = kNoPartition);
// blob_read.cc: memcpy(dst, src, n), staged through this thread's area when the copy would
// alias (base/copy_alias.h), as PreadBlob stages cached reads that would.
void CopyOut(void* dst, const void* src, size_t n);

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

// member_io.cc: what the loaders share.
inline constexpr uint64_t kNoBlock = ~uint64_t{0};
// Counts and logs damage of member `e` (in `block`, if given) on this rank; returns -EIO.
long Damaged(const State& s, const meta::ImageEntry& e, const char* why, uint64_t block = kNoBlock);
// Inflates `in` into exactly `out`, counted in SnapshotIoStats; 0 or an error code.
long InflateTimed(std::span<const uint8_t> in, std::span<uint8_t> out);

// Stored bytes [off, off + n) of member `entry`, read directly (no check): n, or a negative
// errno.
long ReadStored(uint32_t entry, uint64_t off, void* dst, size_t n);

// member_raw_blocks.cc: raw members with block checksums (Codec::kRawBlocks).
// Bytes [off, off + n) of such a member into `dst`: blocks this node has checked are read
// directly, any other is read whole, checked against its checksum and marked, and the bytes
// copied from what was checked. n, or a negative errno (EIO, logged: a damaged block).
long ReadRawBlocks(State& s, uint32_t entry, uint64_t off, uint8_t* dst, size_t n);
// Checks the blocks of [off, off + n) this node has not checked yet: 0 or a negative errno.
long CheckRawBlocks(State& s, uint32_t entry, uint64_t off, uint64_t n);

// member_blocks.cc: block-deflated members.
// Block b of a block-deflated member, inflated and checked, into `out` (BlockPlainBytes
// long). Reads the trailer and b's table entry, then b's stream only. kStale, and no damage
// logged, when node-cache bytes were evicted while in use.
class MemberSource;
long LoadBlock(State& s, const MemberSource& src, const meta::ImageEntry& e, uint64_t b,
               uint8_t* out);
// Bytes [off, off + n) of a block-deflated member: each block they touch is inflated once
// into the cache (a reader going through the member in 128 KiB reads inflates each block
// once), the others not at all.
long ReadBlocks(State& s, uint32_t entry, uint64_t off, void* dst, size_t n);

}  // namespace fanstore::runtime
