// One row per system call the runtime serves: FANSTORE_SERVED_CALLS(X) gives, for each,
//   X(number, handler, vfork rule, fds, paths, flags)
// and kCallRows, made from it and from the unserved calls (unserved_calls.h) at compile
// time, is what every part that asks "where does this call take an fd or a path" reads:
// the prefilter's interest (runtime/calls/prefilter_wants.h), the hook's check for parked
// fds and its routing (runtime/calls/hook.cc), the skeleton's path argument
// (runtime/paths/skeleton.h) and every handler's fds and paths (runtime/calls/args.h;
// tests/layers_test.sh refuses a handler that reads one by position). Adding a call is one
// row and its handler.
//   fds    the arguments that are fds the call acts on: Fd(i), Fd(i, j), or 0
//   paths  its (dirfd, path) pairs: Path(p) (relative to the cwd), PathAt(d, p), two of
//          them with Paths(x, y), or kNoPath
//   flags  what else decides whether a call is the runtime's (CallFlag below)
// The handler and the vfork rule (kShared: the handler allocates, locks or changes shared
// tables, so it must not run in a vfork child, which shares its parent's memory) are only
// names here; hook.cc expands the list where they are declared.
// Thread-safety: constant data.
#pragma once

#include <sys/syscall.h>

#include <array>
#include <cstdint>

#include "base/syscall_numbers.h"
#include "runtime/names/call_args.h"
#include "runtime/names/unserved_calls.h"

namespace fanstore::runtime {

enum CallFlag : uint16_t {
  kListed = 1,            // a row of the table (served or unserved)
  kAlways = 1 << 1,       // always the hook's (exit_group, chdir, fchdir, close_range)
  kVirtualCwd = 1 << 2,   // the hook's while the cwd is in the dataset (getcwd)
  kAnyFdOpen = 1 << 3,    // its fds are in the program's arrays: the hook's while any fd is
                          // virtual (the prefilter does not read them: a bad pointer is EFAULT)
  kOwnFdCheck = 1 << 4,   // its fds may be fanrun's reserved numbers, and its handler checks
                          // parked fds itself (close, fcntl, dup2, dup3)
  kMapFile = 1 << 5,      // mmap: its fd counts only without MAP_ANONYMOUS
  kClone = 1 << 6,        // ioctl: FICLONE's source fd in a[2]; FICLONERANGE always
  kDirfdItself = 1 << 7,  // a virtual dirfd alone makes it the hook's (a null or absolute
                          // path may still name the fd: utimensat's futimens, the unserved)
  kEmptyPathFd = 1 << 8,  // "" with AT_EMPTY_PATH names the dirfd: a parked one is EBADF
  kProcPath = 1 << 9,     // a /proc path may name a virtual fd's member (readlink)
  kSkeleton = 1 << 10,    // a kernel answer from the mount point's skeleton is served again
                          // (runtime/paths/skeleton.h), for its first path
  // The mutation calls (runtime/calls/handlers_mutation.cc):
  kFollows = 1 << 11,   // follows a symlink in its first path's last component (else not,
                        // unless its flags_arg says so)
  kCreates = 1 << 12,   // creates its first path
  kRemoves = 1 << 13,   // removes its first path (the mount is checked before the name)
  kUnserved = 1 << 14,  // unserved_calls.h: EROFS on dataset paths
};

// ioctl's FICLONE takes its source fd here (kClone), FICLONERANGE a struct holding it.
inline constexpr int kCloneSourceArg = 2;

struct CallRow {
  uint8_t fds = 0;
  int8_t flags_arg = -1;  // where AT_SYMLINK_NOFOLLOW is, for a call that follows unless set
  PathArgs paths;
  uint16_t flags = 0;
};

// clang-format off
#define FANSTORE_SERVED_CALLS(X)                                                                 \
  X(SYS_open, OpenCounted, kShared, 0, Path(0), kSkeleton)                                       \
  X(SYS_openat, OpenCounted, kShared, 0, PathAt(0, 1), kSkeleton)                                \
  X(SYS_openat2, OpenCounted, kShared, 0, PathAt(0, 1), 0)                                       \
  X(SYS_creat, OpenCounted, kShared, 0, Path(0), 0)                                              \
  X(SYS_stat, StatPathCounted, kSafe, 0, Path(0), kSkeleton)                                    \
  X(SYS_lstat, StatPathCounted, kSafe, 0, Path(0), kSkeleton)                                    \
  X(SYS_newfstatat, StatPathCounted, kSafe, 0, PathAt(0, 1), kSkeleton | kEmptyPathFd)           \
  X(SYS_statx, StatxCounted, kSafe, 0, PathAt(0, 1), kSkeleton | kEmptyPathFd)                   \
  X(SYS_fstat, FstatCounted, kSafe, Fd(0), kNoPath, 0)                                           \
  X(SYS_access, OnAccess, kSafe, 0, Path(0), kSkeleton)                                          \
  X(SYS_faccessat, OnAccess, kSafe, 0, PathAt(0, 1), kSkeleton)                                  \
  X(SYS_faccessat2, OnAccess, kSafe, 0, PathAt(0, 1), kSkeleton)                                 \
  X(SYS_readlink, OnReadlink, kSafe, 0, Path(0), kSkeleton | kProcPath)                          \
  X(SYS_readlinkat, OnReadlink, kSafe, 0, PathAt(0, 1), kSkeleton | kProcPath)                   \
  X(SYS_chdir, OnChdir, kSafe, 0, Path(0), kAlways) /* a vfork child's chdir is its own */       \
  X(SYS_fchdir, OnChdir, kSafe, Fd(0), kNoPath, kAlways)                                         \
  X(SYS_getcwd, ArgsOnly<OnGetcwd>, kSafe, 0, kNoPath, kVirtualCwd)                              \
  X(SYS_execve, OnExec, kSafe, 0, Path(0), 0) /* the entry sends every exec to the hook */       \
  X(SYS_execveat, OnExec, kSafe, 0, PathAt(0, 1), 0)                                             \
  X(SYS_statfs, OnStatfs, kSafe, 0, Path(0), 0)                                                  \
  X(SYS_fstatfs, OnStatfs, kSafe, Fd(0), kNoPath, 0)                                             \
  X(SYS_getxattr, OnXattrPath, kSafe, 0, Path(0), 0)                                             \
  X(SYS_lgetxattr, OnXattrPath, kSafe, 0, Path(0), 0)                                            \
  X(SYS_listxattr, OnXattrPath, kSafe, 0, Path(0), 0)                                            \
  X(SYS_llistxattr, OnXattrPath, kSafe, 0, Path(0), 0)                                           \
  X(SYS_setxattr, OnXattrPath, kSafe, 0, Path(0), 0)                                             \
  X(SYS_lsetxattr, OnXattrPath, kSafe, 0, Path(0), 0)                                            \
  X(SYS_removexattr, OnXattrPath, kSafe, 0, Path(0), 0)                                          \
  X(SYS_lremovexattr, OnXattrPath, kSafe, 0, Path(0), 0)                                         \
  X(SYS_read, OnRead, kShared, Fd(0), kNoPath, 0)                                                \
  X(SYS_pread64, OnRead, kShared, Fd(0), kNoPath, 0)                                             \
  X(SYS_readv, OnRead, kShared, Fd(0), kNoPath, 0)                                               \
  X(SYS_preadv, OnRead, kShared, Fd(0), kNoPath, 0)                                              \
  X(SYS_preadv2, OnRead, kShared, Fd(0), kNoPath, 0)                                             \
  X(SYS_lseek, ArgsOnly<OnLseek>, kSafe, Fd(0), kNoPath, 0)                                      \
  X(SYS_close, ArgsOnly<OnClose>, kSafe, Fd(0), kNoPath, kOwnFdCheck)                            \
  X(SYS_close_range, ArgsOnly<OnCloseRange>, kSafe, 0, kNoPath, kAlways) /* checks itself */     \
  X(SYS_dup, OnDup, kShared, Fd(0), kNoPath, 0)                                                  \
  X(SYS_dup2, OnDup, kSafe, Fd(0, 1), kNoPath, kOwnFdCheck) /* a vfork child's is its own */    \
  X(SYS_dup3, OnDup, kSafe, Fd(0, 1), kNoPath, kOwnFdCheck)                                      \
  X(SYS_fcntl, ArgsOnly<OnFcntl>, kSafe, Fd(0), kNoPath, kOwnFdCheck)                            \
  X(SYS_ioctl, ArgsOnly<OnIoctl>, kSafe, Fd(0), kNoPath, kClone)                                 \
  X(SYS_getdents64, ArgsOnly<OnGetdents>, kShared, Fd(0), kNoPath, 0)                            \
  X(SYS_mmap, ArgsOnly<OnMmap>, kShared, Fd(4), kNoPath, kMapFile)                               \
  X(SYS_sendfile, OnCopy, kShared, Fd(0, 1), kNoPath, 0)                                         \
  X(SYS_copy_file_range, OnCopy, kShared, Fd(0, 2), kNoPath, 0)                                  \
  X(SYS_splice, OnCopy, kShared, Fd(0, 2), kNoPath, 0)                                           \
  X(SYS_poll, OnPoll, kSafe, 0, kNoPath, kAnyFdOpen)                                             \
  X(SYS_ppoll, OnPoll, kSafe, 0, kNoPath, kAnyFdOpen)                                            \
  X(SYS_select, OnSelect, kSafe, 0, kNoPath, kAnyFdOpen)                                         \
  X(SYS_pselect6, OnSelect, kSafe, 0, kNoPath, kAnyFdOpen)                                       \
  X(SYS_epoll_ctl, ArgsOnly<OnEpollCtl>, kSafe, Fd(0, 2), kNoPath, 0)                            \
  X(SYS_fadvise64, OnFdMisc, kSafe, Fd(0), kNoPath, 0)                                           \
  X(SYS_readahead, OnFdMisc, kSafe, Fd(0), kNoPath, 0)                                           \
  X(SYS_fsync, OnFdMisc, kSafe, Fd(0), kNoPath, 0)                                               \
  X(SYS_fdatasync, OnFdMisc, kSafe, Fd(0), kNoPath, 0)                                           \
  X(SYS_syncfs, OnFdMisc, kSafe, Fd(0), kNoPath, 0)                                              \
  X(SYS_sync_file_range, OnFdMisc, kSafe, Fd(0), kNoPath, 0)                                     \
  X(SYS_flock, OnFdMisc, kSafe, Fd(0), kNoPath, 0)                                               \
  X(SYS_ftruncate, OnFdMisc, kSafe, Fd(0), kNoPath, 0)                                           \
  X(SYS_fchmod, OnFdMisc, kSafe, Fd(0), kNoPath, 0)                                              \
  X(SYS_fchown, OnFdMisc, kSafe, Fd(0), kNoPath, 0)                                              \
  X(SYS_fgetxattr, OnFdMisc, kSafe, Fd(0), kNoPath, 0)                                           \
  X(SYS_flistxattr, OnFdMisc, kSafe, Fd(0), kNoPath, 0)                                          \
  X(SYS_fsetxattr, OnFdMisc, kSafe, Fd(0), kNoPath, 0)                                           \
  X(SYS_fremovexattr, OnFdMisc, kSafe, Fd(0), kNoPath, 0)                                        \
  X(SYS_write, OnFdMisc, kSafe, Fd(0), kNoPath, 0)                                               \
  X(SYS_pwrite64, OnFdMisc, kSafe, Fd(0), kNoPath, 0)                                            \
  X(SYS_writev, OnFdMisc, kSafe, Fd(0), kNoPath, 0)                                              \
  X(SYS_pwritev, OnFdMisc, kSafe, Fd(0), kNoPath, 0)                                             \
  X(SYS_pwritev2, OnFdMisc, kSafe, Fd(0), kNoPath, 0)                                            \
  X(SYS_unlink, OnMutationPath, kSafe, 0, Path(0), kRemoves)                                     \
  X(SYS_unlinkat, OnMutationPath, kSafe, 0, PathAt(0, 1), kRemoves)                              \
  X(SYS_rmdir, OnMutationPath, kSafe, 0, Path(0), kRemoves)                                      \
  X(SYS_mkdir, OnMutationPath, kSafe, 0, Path(0), kCreates)                                      \
  X(SYS_mkdirat, OnMutationPath, kSafe, 0, PathAt(0, 1), kCreates)                               \
  X(SYS_mknod, OnMutationPath, kSafe, 0, Path(0), kCreates)                                      \
  X(SYS_mknodat, OnMutationPath, kSafe, 0, PathAt(0, 1), kCreates)                               \
  X(SYS_rename, OnMutationPath, kSafe, 0, Paths(Path(0), Path(1)), kRemoves)                     \
  X(SYS_renameat, OnMutationPath, kSafe, 0, Paths(PathAt(0, 1), PathAt(2, 3)), kRemoves)         \
  X(SYS_renameat2, OnMutationPath, kSafe, 0, Paths(PathAt(0, 1), PathAt(2, 3)), kRemoves)        \
  X(SYS_link, OnMutationPath, kSafe, 0, Paths(Path(0), Path(1)), 0)                              \
  X(SYS_linkat, OnMutationPath, kSafe, 0, Paths(PathAt(0, 1), PathAt(2, 3)), 0)                  \
  X(SYS_symlink, OnMutationPath, kSafe, 0, Path(1), kCreates) /* a[0] is only the target */      \
  X(SYS_symlinkat, OnMutationPath, kSafe, 0, PathAt(1, 2), kCreates)                             \
  X(SYS_chmod, OnMutationPath, kSafe, 0, Path(0), kFollows)                                      \
  X(SYS_fchmodat, OnMutationPath, kSafe, 0, PathAt(0, 1), kFollows)                              \
  X(SYS_chown, OnMutationPath, kSafe, 0, Path(0), kFollows)                                      \
  X(SYS_lchown, OnMutationPath, kSafe, 0, Path(0), 0)                                            \
  X(SYS_fchownat, OnMutationPath, kSafe, 0, PathAt(0, 1), kFollows)                              \
  X(SYS_truncate, OnMutationPath, kSafe, 0, Path(0), kFollows)                                   \
  X(SYS_utime, OnMutationPath, kSafe, 0, Path(0), kFollows)                                      \
  X(SYS_utimes, OnMutationPath, kSafe, 0, Path(0), kFollows)                                     \
  X(SYS_utimensat, OnUtimensat, kSafe, 0, PathAt(0, 1), kFollows | kDirfdItself)                 \
  X(SYS_futimesat, OnMutationPath, kSafe, 0, PathAt(0, 1), kFollows)                             \
  X(SYS_exit_group, ExitGroup, kSafe, 0, kNoPath, kAlways)
// clang-format on

// fchownat(dirfd, path, uid, gid, flags) and utimensat(dirfd, path, times, flags) follow
// unless AT_SYMLINK_NOFOLLOW is in their flags argument.
constexpr int FlagsArgOf(long nr) {
  return nr == SYS_fchownat ? 4 : nr == SYS_utimensat ? 3 : -1;
}

// An unserved call's row: its paths, refused on dataset paths, and any virtual dirfd.
constexpr CallRow UnservedRow(PathArgs paths) {
  return CallRow{0, -1, paths, static_cast<uint16_t>(kListed | kUnserved | kDirfdItself)};
}

inline constexpr int kCallRowsN = 512;  // the highest number + 1 (intercept::kMaxSyscallNr)

constexpr std::array<CallRow, kCallRowsN> MakeCallRows() {
  std::array<CallRow, kCallRowsN> rows{};
  // (A negative number is a call this architecture does not have: base/syscall_numbers.h.)
#define FANSTORE_CALL_ROW(nr, handler, rule, fds, paths, flags)                              \
  if (nr >= 0)                                                                               \
    rows[static_cast<size_t>(nr)] = CallRow{fds, static_cast<int8_t>(FlagsArgOf(nr)), paths, \
                                            static_cast<uint16_t>(kListed | (flags))};
  FANSTORE_SERVED_CALLS(FANSTORE_CALL_ROW)
#undef FANSTORE_CALL_ROW
#define FANSTORE_UNSERVED_ROW(nr, name, paths) \
  if (nr >= 0) rows[static_cast<size_t>(nr)] = UnservedRow(paths);
  FANSTORE_UNSERVED_CALLS(FANSTORE_UNSERVED_ROW)
#undef FANSTORE_UNSERVED_ROW
  return rows;
}
inline constexpr std::array<CallRow, kCallRowsN> kCallRows = MakeCallRows();

inline constexpr CallRow kNoRow{};

// The row of `nr` (an empty one for a number the runtime does not watch).
constexpr const CallRow& RowOf(long nr) {
  return static_cast<unsigned long>(nr) < kCallRowsN ? kCallRows[static_cast<size_t>(nr)] : kNoRow;
}

}  // namespace fanstore::runtime
