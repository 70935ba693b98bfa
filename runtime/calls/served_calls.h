// The system calls the runtime serves, as one list: X(number, handler, vfork rule) for
// each. hook.cc expands it into its routing table (the handler, and kShared when the
// handler allocates, locks or changes shared tables, so that it must not run in a vfork
// child, which shares its parent's memory). The unserved calls (unserved_calls.h) are
// intercepted too (each is refused on dataset paths) and routed to one handler.
// ServedInterest() is every number of both lists: the runtime's interest, which
// `fanrun doctor` plans libc with, without linking the runtime.
// Thread-safety: constant data.
#pragma once

#include <sys/syscall.h>

#include "base/syscall_numbers.h"
#include "intercept/planner.h"
#include "runtime/calls/unserved_calls.h"

namespace fanstore::runtime {

// The served calls that act on the fd in their first argument (and on nothing else, but
// for ioctl's FICLONE source): the prefilter sends them to the hook when that fd is
// virtual, and the hook fails them with EBADF when it is parked (runtime/process/fd_table.h).
constexpr bool ActsOnFirstFd(long nr) {
  switch (nr) {
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
    case SYS_syncfs:
    case SYS_sync_file_range:
    case SYS_flock:
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
      return true;
    default:
      return false;
  }
}

#define FANSTORE_SERVED_CALLS(X)                                                         \
  X(SYS_open, OpenCounted, kShared)                                                      \
  X(SYS_openat, OpenCounted, kShared)                                                    \
  X(SYS_openat2, OpenCounted, kShared)                                                   \
  X(SYS_creat, OpenCounted, kShared)                                                     \
  X(SYS_stat, StatPathCounted, kSafe)                                                    \
  X(SYS_lstat, StatPathCounted, kSafe)                                                   \
  X(SYS_newfstatat, StatPathCounted, kSafe)                                              \
  X(SYS_statx, StatxCounted, kSafe)                                                      \
  X(SYS_fstat, FstatCounted, kSafe)                                                      \
  X(SYS_access, OnAccess, kSafe)                                                         \
  X(SYS_faccessat, OnAccess, kSafe)                                                      \
  X(SYS_faccessat2, OnAccess, kSafe)                                                     \
  X(SYS_readlink, OnReadlink, kSafe)                                                     \
  X(SYS_readlinkat, OnReadlink, kSafe)                                                   \
  X(SYS_chdir, OnChdir, kSafe) /* checks for itself: a vfork child's chdir is its own */ \
  X(SYS_fchdir, OnChdir, kSafe)                                                          \
  X(SYS_getcwd, ArgsOnly<OnGetcwd>, kSafe)                                               \
  X(SYS_execve, OnExec, kSafe)                                                           \
  X(SYS_execveat, OnExec, kSafe)                                                         \
  X(SYS_statfs, OnStatfs, kSafe)                                                         \
  X(SYS_fstatfs, OnStatfs, kSafe)                                                        \
  X(SYS_getxattr, OnXattrPath, kSafe)                                                    \
  X(SYS_lgetxattr, OnXattrPath, kSafe)                                                   \
  X(SYS_listxattr, OnXattrPath, kSafe)                                                   \
  X(SYS_llistxattr, OnXattrPath, kSafe)                                                  \
  X(SYS_setxattr, OnXattrPath, kSafe)                                                    \
  X(SYS_lsetxattr, OnXattrPath, kSafe)                                                   \
  X(SYS_removexattr, OnXattrPath, kSafe)                                                 \
  X(SYS_lremovexattr, OnXattrPath, kSafe)                                                \
  X(SYS_read, OnRead, kShared)                                                           \
  X(SYS_pread64, OnRead, kShared)                                                        \
  X(SYS_readv, OnRead, kShared)                                                          \
  X(SYS_preadv, OnRead, kShared)                                                         \
  X(SYS_preadv2, OnRead, kShared)                                                        \
  X(SYS_lseek, ArgsOnly<OnLseek>, kSafe)                                                 \
  X(SYS_close, ArgsOnly<OnClose>, kSafe)            /* checks for itself */              \
  X(SYS_close_range, ArgsOnly<OnCloseRange>, kSafe) /* checks for itself */              \
  X(SYS_dup, OnDup, kShared)                                                             \
  X(SYS_dup2, OnDup, kSafe) /* checks for itself: a vfork child's dup2 is its own */     \
  X(SYS_dup3, OnDup, kSafe)                                                              \
  X(SYS_fcntl, ArgsOnly<OnFcntl>, kSafe) /* checks for itself */                         \
  X(SYS_ioctl, ArgsOnly<OnIoctl>, kSafe)                                                 \
  X(SYS_getdents64, ArgsOnly<OnGetdents>, kShared)                                       \
  X(SYS_mmap, ArgsOnly<OnMmap>, kShared)                                                 \
  X(SYS_sendfile, OnCopy, kShared)                                                       \
  X(SYS_copy_file_range, OnCopy, kShared)                                                \
  X(SYS_splice, OnCopy, kShared)                                                         \
  X(SYS_poll, OnPoll, kSafe)                                                             \
  X(SYS_ppoll, OnPoll, kSafe)                                                            \
  X(SYS_select, OnSelect, kSafe)                                                         \
  X(SYS_pselect6, OnSelect, kSafe)                                                       \
  X(SYS_epoll_ctl, ArgsOnly<OnEpollCtl>, kSafe)                                          \
  X(SYS_fadvise64, OnFdMisc, kSafe)                                                      \
  X(SYS_readahead, OnFdMisc, kSafe)                                                      \
  X(SYS_fsync, OnFdMisc, kSafe)                                                          \
  X(SYS_fdatasync, OnFdMisc, kSafe)                                                      \
  X(SYS_syncfs, OnFdMisc, kSafe)                                                         \
  X(SYS_sync_file_range, OnFdMisc, kSafe)                                                \
  X(SYS_flock, OnFdMisc, kSafe)                                                          \
  X(SYS_ftruncate, OnFdMisc, kSafe)                                                      \
  X(SYS_fchmod, OnFdMisc, kSafe)                                                         \
  X(SYS_fchown, OnFdMisc, kSafe)                                                         \
  X(SYS_fgetxattr, OnFdMisc, kSafe)                                                      \
  X(SYS_flistxattr, OnFdMisc, kSafe)                                                     \
  X(SYS_fsetxattr, OnFdMisc, kSafe)                                                      \
  X(SYS_fremovexattr, OnFdMisc, kSafe)                                                   \
  X(SYS_write, OnFdMisc, kSafe)                                                          \
  X(SYS_pwrite64, OnFdMisc, kSafe)                                                       \
  X(SYS_writev, OnFdMisc, kSafe)                                                         \
  X(SYS_pwritev, OnFdMisc, kSafe)                                                        \
  X(SYS_pwritev2, OnFdMisc, kSafe)                                                       \
  X(SYS_unlink, OnMutationPath, kSafe)                                                   \
  X(SYS_unlinkat, OnMutationPath, kSafe)                                                 \
  X(SYS_rmdir, OnMutationPath, kSafe)                                                    \
  X(SYS_mkdir, OnMutationPath, kSafe)                                                    \
  X(SYS_mkdirat, OnMutationPath, kSafe)                                                  \
  X(SYS_mknod, OnMutationPath, kSafe)                                                    \
  X(SYS_mknodat, OnMutationPath, kSafe)                                                  \
  X(SYS_rename, OnMutationPath, kSafe)                                                   \
  X(SYS_renameat, OnMutationPath, kSafe)                                                 \
  X(SYS_renameat2, OnMutationPath, kSafe)                                                \
  X(SYS_link, OnMutationPath, kSafe)                                                     \
  X(SYS_linkat, OnMutationPath, kSafe)                                                   \
  X(SYS_symlink, OnMutationPath, kSafe)                                                  \
  X(SYS_symlinkat, OnMutationPath, kSafe)                                                \
  X(SYS_chmod, OnMutationPath, kSafe)                                                    \
  X(SYS_fchmodat, OnMutationPath, kSafe)                                                 \
  X(SYS_chown, OnMutationPath, kSafe)                                                    \
  X(SYS_lchown, OnMutationPath, kSafe)                                                   \
  X(SYS_fchownat, OnMutationPath, kSafe)                                                 \
  X(SYS_truncate, OnMutationPath, kSafe)                                                 \
  X(SYS_utime, OnMutationPath, kSafe)                                                    \
  X(SYS_utimes, OnMutationPath, kSafe)                                                   \
  X(SYS_utimensat, OnUtimensat, kSafe)                                                   \
  X(SYS_futimesat, OnMutationPath, kSafe)                                                \
  X(SYS_exit_group, ExitGroup, kSafe)

inline intercept::Interest ServedInterest() {
  intercept::Interest interest;
#define FANSTORE_SERVED_NR(nr, handler, rule) interest.nrs.set(static_cast<size_t>(nr));
  FANSTORE_SERVED_CALLS(FANSTORE_SERVED_NR)
#undef FANSTORE_SERVED_NR
  for (const UnservedCall& c : kUnservedCalls) interest.nrs.set(static_cast<size_t>(c.nr));
  return interest;
}

}  // namespace fanstore::runtime
