// Reading a member's bytes: raw members straight from their blob (copied from a mapping
// of the blob when its pages are cached, from the first read for staged blobs and from the
// second read in a process for others; else a copy by the kernel, io_uring for pages not
// cached, one ring per thread, re-created after fork; pread where io_uring is
// unavailable), compressed members
// inflated whole with ISA-L and checked against their CRC32C, raw members checked once per
// node (runtime/data/verified.h; on every read with FANSTORE_VERIFY=all). A read that does not take
// a small member whole at once loads the member into a small per-process cache, so Python's and
// PIL's many short reads are served from memory. A damaged member is EIO for that file and one log
// line naming the partition and member. The parts: blob_read.cc (the kernel's copy, io_uring,
// readahead), residency.cc (when to copy from a mapping instead), member_cache.cc, shared_copies.cc
// (SharedCopyOf), and here how a member is loaded and read once its source is open
// (runtime/data/member_io_parts.h); where its bytes come from is member_source.h's to say.
// Thread-safety: safe from any thread (the cache has a lock); never from a vfork child.
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace fanstore::runtime {

// Copies up to `len` bytes of entry `entry` from offset `off` into `dst`. Returns the
// number of bytes (0 at or past the end) or a negative errno.
ssize_t ReadMember(uint32_t entry, uint64_t off, void* dst, size_t len);

// A member other nodes hold that is read by the piece (io/pieces.h): a descriptor of all
// of it is best made here from its pieces, not fetched whole.
bool FetchedByPiece(uint32_t entry);
// A read-only descriptor of a file in the node cache's directory holding all the bytes of
// such a member, made from its pieces by the first process of the node that needs it (a
// mapping): the node's other processes map the same pages instead of each holding a copy.
// A negative errno when there is no node cache or no room for it.
long SharedCopyOf(uint32_t entry);

// Checks bytes [off, off + len) of raw member `entry` against their CRC32C unless this node
// did so before (runtime/data/verified.h): a member stored with block checksums the blocks
// of the range, any other raw member whole. 0, or -EIO (logged and counted) when they are
// damaged, or another negative errno. For the paths that do not read through ReadMember (a
// mapping).
long CheckRawMember(uint32_t entry, uint64_t off, uint64_t len);

// In a fork child (the atfork handler): forgets which members the parent had read, whose
// pages the child has not mapped.
void MemberIoAfterFork();

struct IoStats {
  uint64_t reads = 0, bytes = 0, inflates = 0, inflate_ns = 0, cache_hits = 0, errors = 0;
  uint64_t remote = 0;           // reads of members other nodes hold
  uint64_t node_cache_hits = 0;  // of those, copied from the node cache arena
  uint64_t device_reads = 0;     // blob reads not in the page cache (through io_uring)
  uint64_t mapped_reads = 0;     // members copied from a mapping of their page-cached blob
  uint64_t trusted_reads = 0;    // of those, re-reads copied without a page check (ReuseTrust)
  uint64_t raw_checks = 0;       // raw members checked against their CRC32C by this process
  uint64_t landed_reads = 0;     // reads from a copy still being made (its chunks had landed)
  uint64_t landing_waits = 0;    // of those, reads that asked for their chunks and waited
  uint64_t landing_gave_up = 0;  // reads that stopped waiting for a stuck copy and read DATA
  uint64_t realigned = 0;        // copies staged because they would alias (base/copy_alias.h)
};
IoStats SnapshotIoStats();

}  // namespace fanstore::runtime
