// The prefilter's interest set: for each system call, whether its arguments could
// concern the dataset (a virtual fd, a path that may lead under the mount point, the cwd).
// The list of numbers is runtime/calls/served_calls.h's (tests/runtime/served_calls_test.cc
// checks that they agree); this is how each is recognised. Part of runtime/calls/prefilter.cc's
// translation unit (it alone includes this; prefilter_paths.h, included below, refuses any
// other includer).
// Thread-safety: pure functions of the call and the prefilter's state (read only); any
// thread, signal handlers included.
#pragma once

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/syscall.h>

#include "runtime/calls/prefilter_paths.h"
#include "runtime/calls/served_calls.h"
#include "runtime/calls/unserved_calls.h"

namespace fanstore::runtime {
namespace {

FANSTORE_HOT_TEXT int Wants(long nr, const long a[6]) noexcept {
  if (ActsOnFirstFd(nr))
    return VirtualFd(a[0]) ||
           (nr == SYS_ioctl && a[1] == static_cast<long>(FICLONE) && VirtualFd(a[2])) ||
           (nr == SYS_ioctl && a[1] == static_cast<long>(FICLONERANGE));
  switch (nr) {
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
    // The application's arrays are not read here (a bad pointer must give EFAULT, not a
    // crash): with any virtual fd open, the hook copies them in safely.
    case SYS_poll:
    case SYS_ppoll:
    case SYS_select:
    case SYS_pselect6:
      return g_prefilter.fd_count->load(std::memory_order_relaxed) > 0;
    case SYS_epoll_ctl:
      return VirtualFd(a[0]) || VirtualFd(a[2]);
    case SYS_close_range:
    case SYS_chdir:
    case SYS_fchdir:
    case SYS_exit_group:
      return 1;
    case SYS_getcwd:  // (2: a native cwd beside the mount point, the kernel's to name)
      return g_prefilter.cwd_virtual.load(std::memory_order_relaxed) == 1;
    // path calls: (dirfd, path) positions
    case SYS_readlink:
      return MaybeOurs(AT_FDCWD, a[0]) || IsProc(a[0]);
    case SYS_readlinkat:
      return MaybeOurs(a[0], a[1]) || IsProc(a[1]);
    case SYS_open:
    case SYS_creat:
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
    case SYS_openat2:
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
             (a[1] && *reinterpret_cast<const char*>(a[1]) == 0 && VirtualFd(a[0])) ||
             (nr == SYS_utimensat && !a[1] && VirtualFd(a[0]));  // futimens
    case SYS_renameat:
    case SYS_renameat2:
    case SYS_linkat:
      return MaybeOurs(a[0], a[1]) || MaybeOurs(a[2], a[3]);
    case SYS_symlinkat:
      return MaybeOurs(a[1], a[2]);
    // runtime/calls/unserved_calls.h: refused on dataset paths
    case 134:  // uselib
    case SYS_chroot:
    case SYS_acct:
    case SYS_umount2:
    case SYS_swapon:
    case SYS_swapoff:
      return MaybeOurs(AT_FDCWD, a[0]);
    case SYS_pivot_root:
      return MaybeOurs(AT_FDCWD, a[0]) || MaybeOurs(AT_FDCWD, a[1]);
    case SYS_mount:
    case SYS_quotactl:
    case SYS_inotify_add_watch:
      return MaybeOurs(AT_FDCWD, a[1]);
    case SYS_fanotify_mark:
      return MaybeOurs(a[3], a[4]) || VirtualFd(a[3]);
    case kNrMoveMount:
      return MaybeOurs(a[0], a[1]) || MaybeOurs(a[2], a[3]) || VirtualFd(a[0]) || VirtualFd(a[2]);
    case SYS_name_to_handle_at:
    case kNrOpenTree:
    case kNrFspick:
    case kNrMountSetattr:
    case kNrFchmodat2:
    case kNrSetxattrat:
    case kNrGetxattrat:
    case kNrListxattrat:
    case kNrRemovexattrat:
    case kNrOpenTreeAttr:
    case kNrFileGetattr:
    case kNrFileSetattr:
      return MaybeOurs(a[0], a[1]) || VirtualFd(a[0]);
    default:
      return 0;
  }
}

}  // namespace
}  // namespace fanstore::runtime
