// MapHugeAligned: a read-only shared mapping of a file at a 2 MiB-aligned address, so that
// the file's 2 MiB folios (a tmpfs copy collapsed with MADV_COLLAPSE, a blob read ahead in
// huge folios) can be mapped by one PMD entry each: a new process then takes one fault per
// 2 MiB instead of one per 64 KiB. The kernel aligns a file mapping only where the file
// system asks for it (tmpfs mounted huge=never and ext4 do not), hence the reservation.
// Thread-safety: as mmap; raw system calls only (the runtime and fanrun both use it).
#pragma once

#include <sys/mman.h>
#include <sys/syscall.h>

#include <cstddef>
#include <cstdint>

#include "base/raw_syscall.h"

namespace fanstore::base {

inline constexpr size_t kHugePage = 2u << 20;

// Maps `len` bytes of `fd` from offset 0, PROT_READ and MAP_SHARED, 2 MiB-aligned when
// `len` is at least 2 MiB. Returns the address, or a negative errno (as the raw mmap).
inline long MapHugeAligned(int fd, size_t len) {
  if (len < kHugePage)
    return RawSyscall6(SYS_mmap, 0, static_cast<long>(len), PROT_READ, MAP_SHARED, fd, 0);
  const long span = RawSyscall6(SYS_mmap, 0, static_cast<long>(len + kHugePage), PROT_NONE,
                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (static_cast<unsigned long>(span) >= static_cast<unsigned long>(-4095))
    return RawSyscall6(SYS_mmap, 0, static_cast<long>(len), PROT_READ, MAP_SHARED, fd, 0);
  const uintptr_t start = static_cast<uintptr_t>(span);
  const uintptr_t at = (start + kHugePage - 1) & ~uintptr_t{kHugePage - 1};
  const long m = RawSyscall6(SYS_mmap, static_cast<long>(at), static_cast<long>(len), PROT_READ,
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

}  // namespace fanstore::base
