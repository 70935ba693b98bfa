// The kernel's own (physical) name of a directory: what its /proc/self/fd link reads, for
// an fd the process holds, or for a (dirfd, path) opened with O_PATH for the purpose. The
// runtime asks this wherever a path's meaning depends on symlinks only the kernel follows:
// a ".." after a native name, a native directory fd, the mount point's skeleton.
// Raw system calls and byte loops only: the prefilter (compiled with -mgeneral-regs-only,
// calling no library function) uses these too, so they have internal linkage, each copy
// compiled with its file's flags. No allocation (a vfork child may ask).
// Thread-safety: any thread; no shared state (the caller's buffers only).
#pragma once

#include <fcntl.h>
#include <sys/syscall.h>

#include <cstddef>

#include "base/raw_syscall.h"

namespace fanstore::runtime {

// "/proc/self/fd/N" for fd, in link.
static inline void ProcFdPath(int fd, char (&link)[32]) {
  const char* prefix = "/proc/self/fd/";
  int at = 0;
  while (prefix[at]) {
    link[at] = prefix[at];
    ++at;
  }
  char digits[12];
  int k = 0;
  for (unsigned v = static_cast<unsigned>(fd); k == 0 || v > 0; v /= 10)
    digits[k++] = static_cast<char>('0' + v % 10);
  while (k > 0) link[at++] = digits[--k];
  link[at] = 0;
}

// The kernel's name of what fd refers to, in out[0, room) (not NUL-terminated): its
// length, or -1 when it cannot be read, is not an absolute path, or fills `room` (then it
// may be cut short).
static inline long FdName(int fd, char* out, size_t room) {
  char link[32];
  ProcFdPath(fd, link);
  const long n = base::RawSyscall6(SYS_readlinkat, AT_FDCWD, reinterpret_cast<long>(link),
                                   reinterpret_cast<long>(out), static_cast<long>(room));
  if (n <= 0 || static_cast<size_t>(n) >= room || out[0] != '/') return -1;
  return n;
}

// The kernel's name of directory `path` (NUL-terminated) relative to dirfd, in out[0, room)
// as FdName gives it; -1 if it is not a directory that can be opened.
static inline long DirName(int dirfd, const char* path, char* out, size_t room) {
  const long fd = base::RawSyscall6(SYS_openat, dirfd, reinterpret_cast<long>(path),
                                    O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -1;
  const long n = FdName(static_cast<int>(fd), out, room);
  base::RawSyscall6(SYS_close, fd);
  return n;
}

}  // namespace fanstore::runtime
