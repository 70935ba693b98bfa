// Copies that x86-64's `rep movsb` makes slow, and where to stage them instead.
// On x86-64 CPUs with fast short `rep movsb` (FSRM), which both the kernel's copy to user
// space and glibc's memcpy use for copies of a few KiB and more, a copy whose destination
// lies 1-31 bytes past its source modulo 4 KiB runs about 4x slower (each load waits on a
// store to the same page offset: "4K aliasing"). A buffer malloc returns for 128 KiB or more
// sits 16 bytes past a page boundary, and a file's bytes in the page cache (as a member's in
// its blob) start on one, so a program reading into such a buffer meets it on every read:
// 237 MB of members in 0.10 s against 0.026 s (bench/results/runs.md, "Copies into a buffer
// 16 bytes past a page"). Staged through memory placed 32 bytes before the destination's
// page offset, neither copy aliases: 0.033 s. Elsewhere (aarch64) nothing is staged.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fanstore::base {

inline constexpr uint64_t kAliasPage = 4096;
// Shorter copies are not worth a second copy (glibc's memcpy does not use `rep movsb` below
// a few KiB; the kernel's copy of a short range costs little either way).
inline constexpr size_t kAliasMinBytes = 4096;

// Whether copying n bytes from `src` (an address, or a file offset: the page cache keeps a
// file's byte at its offset's page offset) to `dst` is one that aliases.
inline bool CopyAliases(const void* dst, uint64_t src, size_t n) {
#if defined(__x86_64__)
  const uint64_t d = (reinterpret_cast<uintptr_t>(dst) - src) & (kAliasPage - 1);
  return n >= kAliasMinBytes && d >= 1 && d < 32;
#else
  (void)dst, (void)src, (void)n;
  return false;
#endif
}

// Where in `area` (at least kAliasPage bytes more than what is staged) to stage bytes bound
// for `dst`: 32 bytes before dst's page offset. Copying in from a source that aliases dst
// then has a distance of 4065-4095, and copying out to dst one of 32: neither aliases.
inline uint8_t* StagingFor(uint8_t* area, const void* dst) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(area);
  const uintptr_t want = (reinterpret_cast<uintptr_t>(dst) - 32) & (kAliasPage - 1);
  return area + ((want - a) & (kAliasPage - 1));
}

}  // namespace fanstore::base
