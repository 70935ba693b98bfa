// The huge-page calls the project makes, in one place. MapHugeAligned: a read-only shared
// mapping of a file at a 2 MiB-aligned address, so that
// the file's 2 MiB folios (a tmpfs copy collapsed with MADV_COLLAPSE, a blob read ahead in
// huge folios) can be mapped by one PMD entry each: a new process then takes one fault per
// 2 MiB instead of one per 64 KiB. The kernel aligns a file mapping only where the file
// system asks for it (tmpfs mounted huge=never and ext4 do not), hence the reservation.
// Thread-safety: as mmap; raw system calls only (the runtime and fanrun both use it).
#pragma once

#include <sys/mman.h>
#include <sys/syscall.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "base/raw_syscall.h"

namespace fanstore::base {

inline constexpr size_t kHugePage = 2u << 20;
// (glibc 2.36's headers predate both)
inline constexpr long kMadvPopulateRead = 22;  // Linux 5.14
inline constexpr long kMadvCollapse = 25;      // Linux 6.1

// Why MADV_COLLAPSE was refused (`err`: its errno), for a line that says a copy is in 4 KiB
// pages.
inline const char* CollapseRefusal(int err) {
  return err == EINVAL   ? "the kernel has no MADV_COLLAPSE (Linux 6.1+) or shmem huge pages are "
                           "denied"
         : err == ENOMEM ? "no memory for huge pages"
                         : "MADV_COLLAPSE failed";
}

// Maps `len` bytes of `fd` from offset 0, MAP_SHARED with `prot` (PROT_READ unless a copy
// is written through it), 2 MiB-aligned when `len` is at least 2 MiB. Returns the address,
// or a negative errno (as the raw mmap).
inline long MapHugeAligned(int fd, size_t len, long prot = PROT_READ) {
  if (len < kHugePage)
    return RawSyscall6(SYS_mmap, 0, static_cast<long>(len), prot, MAP_SHARED, fd, 0);
  const long span = RawSyscall6(SYS_mmap, 0, static_cast<long>(len + kHugePage), PROT_NONE,
                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (static_cast<unsigned long>(span) >= static_cast<unsigned long>(-4095))
    return RawSyscall6(SYS_mmap, 0, static_cast<long>(len), prot, MAP_SHARED, fd, 0);
  const uintptr_t start = static_cast<uintptr_t>(span);
  const uintptr_t at = (start + kHugePage - 1) & ~uintptr_t{kHugePage - 1};
  const long m = RawSyscall6(SYS_mmap, static_cast<long>(at), static_cast<long>(len), prot,
                             MAP_SHARED | MAP_FIXED, fd, 0);
  if (static_cast<unsigned long>(m) >= static_cast<unsigned long>(-4095)) {
    RawSyscall6(SYS_munmap, span, static_cast<long>(len + kHugePage));
    return m;
  }
  // (what is left of the reservation on either side)
  if (at > start) RawSyscall6(SYS_munmap, span, static_cast<long>(at - start));
  const uintptr_t end = at + ((len + 4095) & ~size_t{4095});
  const uintptr_t span_end = start + len + kHugePage;
  if (span_end > end)
    RawSyscall6(SYS_munmap, static_cast<long>(end), static_cast<long>(span_end - end));
  return m;
}

// MapHugeAligned, marked for reads in 2 MiB folios: MADV_HUGEPAGE makes a fault on a range
// not cached read it as one 2 MiB folio (file systems with large folios), MADV_RANDOM keeps
// the ordinary readahead out, whose window (read_ahead_kb, 128 KiB by default) caps its
// folios far below that and, after any range cached before, chains small folios through the
// rest (18 of 58 MiB huge without it, 51 with it). Copies from the mapping touch only cached
// pages, which neither changes. (Both refused where THP is compiled out: small folios then.)
inline long MapForHugeReads(int fd, size_t len) {
  const long m = MapHugeAligned(fd, len);
  if (m >= 0) {
    RawSyscall6(SYS_madvise, m, static_cast<long>(len), MADV_HUGEPAGE);
    RawSyscall6(SYS_madvise, m, static_cast<long>(len), MADV_RANDOM);
  }
  return m;
}

// Faults bytes [off, off + len) of a mapping from MapForHugeReads into the page cache:
// 0, or a negative errno (EINVAL: a kernel without MADV_POPULATE_READ; EFAULT: past the
// file's end).
inline long PopulateRead(const uint8_t* map, uint64_t off, uint64_t len) {
  const uint64_t start = off & ~uint64_t{4095};
  return RawSyscall6(SYS_madvise, reinterpret_cast<long>(map + start),
                     static_cast<long>((off + len - start + 4095) & ~uint64_t{4095}),
                     kMadvPopulateRead);
}

}  // namespace fanstore::base
