// The runtime's prefilter: decides, before any vector register is saved, whether a call
// can concern the dataset. Compiled with -mgeneral-regs-only; calls nothing.
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/syscall.h>

#include "runtime/fd_table.h"
#include "runtime/prefilter_state.h"

namespace fanstore::runtime {

PrefilterState g_prefilter;

namespace {

// fds are ints to the kernel: only the register's low half counts.
bool VirtualFd(long fd_arg) {
  const int fd = static_cast<int>(fd_arg);
  return fd >= 0 && fd < kMaxFds &&
         (g_prefilter.fd_bits[fd / 64].load(std::memory_order_relaxed) >> (fd % 64) & 1);
}
bool Reserved(long fd) {
  return g_prefilter.reserved_lo > 0 && static_cast<int>(fd) >= g_prefilter.reserved_lo;
}

// Could (dirfd, path) name something under the mount point?
bool MaybeOurs(long dirfd, long p) {
  const char* s = reinterpret_cast<const char*>(p);
  if (!s) return false;
  if (s[0] == '/') {
    // Byte by byte: reading ahead in words could run past the application's NUL.
    const char* m = g_prefilter.mount;
    const unsigned n = g_prefilter.mount_len;
    unsigned i = 0;
    for (; i < n; ++i)
      if (s[i] != m[i]) return false;
    return s[i] == '/' || s[i] == 0 || n == 1;
  }
  if (static_cast<int>(dirfd) == AT_FDCWD)
    return g_prefilter.cwd_virtual.load(std::memory_order_relaxed) != 0;
  return VirtualFd(dirfd);
}

// "/proc/..." (readlink of /proc/self/fd/N names a virtual fd's member).
bool IsProc(long p) {
  const char* s = reinterpret_cast<const char*>(p);
  return s && s[0] == '/' && s[1] == 'p' && s[2] == 'r' && s[3] == 'o' && s[4] == 'c' &&
         s[5] == '/';
}

}  // namespace

int RuntimePrefilter(long nr, const long a[6]) noexcept {
  if (!g_prefilter.active) return 0;
  switch (nr) {
    // fd calls
    case SYS_read:
    case SYS_pread64:
    case SYS_readv:
    case SYS_preadv:
    case SYS_preadv2:
    case SYS_lseek:
    case SYS_fstat:
    case SYS_getdents64:
    case SYS_ioctl:
    case SYS_fadvise64:
    case SYS_readahead:
    case SYS_fsync:
    case SYS_fdatasync:
    case SYS_ftruncate:
    case SYS_fchmod:
    case SYS_fchown:
    case SYS_fgetxattr:
    case SYS_flistxattr:
    case SYS_fsetxattr:
    case SYS_fremovexattr:
    case SYS_fstatfs:
    case SYS_write:
    case SYS_pwrite64:
    case SYS_writev:
    case SYS_pwritev:
    case SYS_pwritev2:
    case SYS_dup:
      return VirtualFd(a[0]) ||
             (nr == SYS_ioctl && a[1] == static_cast<long>(FICLONE) && VirtualFd(a[2])) ||
             (nr == SYS_ioctl && a[1] == static_cast<long>(FICLONERANGE));
    case SYS_close:
    case SYS_fcntl:
      return VirtualFd(a[0]) || Reserved(a[0]);
    case SYS_dup2:
    case SYS_dup3:
      return VirtualFd(a[0]) || VirtualFd(a[1]) || Reserved(a[0]) || Reserved(a[1]);
    case SYS_mmap:
      return !(a[3] & 0x20 /* MAP_ANONYMOUS */) && VirtualFd(a[4]);
    case SYS_sendfile:
      return VirtualFd(a[0]) || VirtualFd(a[1]);
    case SYS_copy_file_range:
    case SYS_splice:
      return VirtualFd(a[0]) || VirtualFd(a[2]);
    case SYS_close_range:
    case SYS_chdir:
    case SYS_fchdir:
    case SYS_exit_group:
      return 1;
    case SYS_getcwd:
      return g_prefilter.cwd_virtual.load(std::memory_order_relaxed) != 0;
    // path calls: (dirfd, path) positions
    case SYS_readlink:
      return MaybeOurs(AT_FDCWD, a[0]) || IsProc(a[0]);
    case SYS_readlinkat:
      return MaybeOurs(a[0], a[1]) || IsProc(a[1]);
    case SYS_open:
    case SYS_stat:
    case SYS_lstat:
    case SYS_access:
    case SYS_statfs:
    case SYS_getxattr:
    case SYS_lgetxattr:
    case SYS_listxattr:
    case SYS_llistxattr:
    case SYS_setxattr:
    case SYS_lsetxattr:
    case SYS_removexattr:
    case SYS_lremovexattr:
    case SYS_unlink:
    case SYS_rmdir:
    case SYS_mkdir:
    case SYS_mknod:
    case SYS_truncate:
    case SYS_chmod:
    case SYS_chown:
    case SYS_lchown:
    case SYS_utime:
    case SYS_utimes:
      return MaybeOurs(AT_FDCWD, a[0]);
    case SYS_rename:
    case SYS_link:
      return MaybeOurs(AT_FDCWD, a[0]) || MaybeOurs(AT_FDCWD, a[1]);
    case SYS_symlink:
      return MaybeOurs(AT_FDCWD, a[1]);
    case SYS_openat:
    case SYS_newfstatat:
    case SYS_statx:
    case SYS_faccessat:
    case SYS_faccessat2:
    case SYS_unlinkat:
    case SYS_mkdirat:
    case SYS_mknodat:
    case SYS_fchmodat:
    case SYS_fchownat:
    case SYS_utimensat:
    case SYS_futimesat:
      return MaybeOurs(a[0], a[1]) ||
             (a[1] && *reinterpret_cast<const char*>(a[1]) == 0 && VirtualFd(a[0]));
    case SYS_renameat:
    case SYS_renameat2:
    case SYS_linkat:
      return MaybeOurs(a[0], a[1]) || MaybeOurs(a[2], a[3]);
    case SYS_symlinkat:
      return MaybeOurs(a[1], a[2]);
    default:
      return 0;
  }
}

}  // namespace fanstore::runtime
