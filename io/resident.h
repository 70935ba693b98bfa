// Whether bytes of a mapped file can be copied without waiting on the device or faulting
// past its end: every page of [off, off + len) must be in the page cache (mincore). Shared
// by the runtime's member reads (raw system calls) and the agent's replies (libc), which
// pass their own mincore.
#pragma once

#include <linux/magic.h>

#include <cstddef>
#include <cstdint>

namespace fanstore::io {

inline constexpr uint64_t kResidentPage = 4096;

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
  const uint64_t first = off / kResidentPage * kResidentPage;
  return (off + len - first + kResidentPage - 1) / kResidentPage;
}

// `map` + `off` if the mapping of `map_bytes` holds [off, off + len) and every page of it is
// resident (`always`: the blob is AlwaysResident, mincore is not asked), else nullptr. `vec`
// has room for SpannedPages(off, len) bytes; mincore(addr, bytes, vec) returns 0 on success.
template <class Mincore>
const uint8_t* ResidentBytes(const uint8_t* map, uint64_t map_bytes, uint64_t off, uint64_t len,
                             bool always, unsigned char* vec, Mincore mincore) {
  if (!map || len == 0 || off > map_bytes || len > map_bytes - off) return nullptr;
  if (always) return map + off;
  const uint64_t first = off / kResidentPage * kResidentPage;
  const uint64_t pages = SpannedPages(off, len);
  if (mincore(map + first, pages * kResidentPage, vec) != 0) return nullptr;
  for (uint64_t i = 0; i < pages; ++i)
    if (!(vec[i] & 1)) return nullptr;
  return map + off;
}

}  // namespace fanstore::io
