// The test hook's prefilter, shaped like the runtime's will be: it wants getpid (counted),
// calls on paths under /fanstore-test, and fd calls on fds in a "virtual" bitmap (empty
// here); everything else goes straight to the kernel. Compiled with -mgeneral-regs-only
// and calls nothing (no strncmp: libc's string functions use vector registers).
#include <stdint.h>
#include <sys/syscall.h>

#include "base/syscall_numbers.h"
#include "intercept/call_abi.h"

namespace fanstore::intercept {

namespace {
uint64_t g_virtual_fds[1024 / 64];  // none: no fd is virtual in the test hook

bool UnderTestDir(long p) {
  const char* s = reinterpret_cast<const char*>(p);
  const char* prefix = "/fanstore-test";
  if (!s) return false;
  for (; *prefix; ++prefix, ++s)
    if (*s != *prefix) return false;
  return true;
}

bool VirtualFd(long fd) {
  return fd >= 0 && fd < 1024 && (g_virtual_fds[fd / 64] >> (fd % 64) & 1);
}
}  // namespace

namespace {
int Wants(long nr, const long a[6]) noexcept {
  switch (nr) {
    case SYS_getpid:
      return 1;
    case SYS_open:
    case SYS_stat:
    case SYS_lstat:
    case SYS_access:
    case SYS_readlink:
      return UnderTestDir(a[0]);
    case SYS_openat:
    case SYS_newfstatat:
    case SYS_statx:
    case SYS_faccessat:
    case SYS_faccessat2:
    case SYS_readlinkat:
      return UnderTestDir(a[1]) ||
             (a[1] && *reinterpret_cast<const char*>(a[1]) == 0 && VirtualFd(a[0]));
    case SYS_read:
    case SYS_write:
    case SYS_close:
    case SYS_fstat:
    case SYS_lseek:
    case SYS_pread64:
    case SYS_getdents64:
    case SYS_fcntl:
    case SYS_ioctl:
      return VirtualFd(a[0]);
    default:
      return 0;
  }
}
}  // namespace

PrefilterResult TestPrefilter(long nr, const long a[6]) noexcept {
  // getppid is answered here, without the hook or the kernel: proves the kAnswered path.
  if (nr == SYS_getppid) return {4242, kAnswered};
  return {0, Wants(nr, a) ? kToHook : kToKernel};
}

}  // namespace fanstore::intercept
