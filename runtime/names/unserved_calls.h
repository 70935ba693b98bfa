// The path-taking system calls the runtime does not serve: mount and namespace calls,
// inotify and fanotify marks, file handles, the *xattrat and file_*attr calls, and
// fchmodat2 and whatever Linux adds next. On a dataset path the kernel would act on
// fanrun's skeleton directories (chmod them, mount over them, create in them), so each of
// these is refused there with EROFS, the answer of a read-only file system; anywhere
// else it goes to the kernel untouched.
// kHighestClassified is the last system call number this table was checked against (the
// numbers from 424 on are the same on every architecture): a newer one
// (tests/runtime/unserved_calls_test.cc reads the system's headers) must be looked at and
// added here if it takes a path. uselib is x86-64's only (a negative number elsewhere:
// base/syscall_numbers.h).
// Thread-safety: constant data.
#pragma once

#include "base/syscall_numbers.h"
#include "runtime/names/call_args.h"

namespace fanstore::runtime {

// Numbers newer than some kernel headers in use (Debian 12's end at 450).
inline constexpr long kNrOpenTree = 428, kNrMoveMount = 429, kNrFspick = 433, kNrMountSetattr = 442,
                      kNrFchmodat2 = 452, kNrSetxattrat = 463, kNrGetxattrat = 464,
                      kNrListxattrat = 465, kNrRemovexattrat = 466, kNrOpenTreeAttr = 467,
                      kNrFileGetattr = 468, kNrFileSetattr = 469;
inline constexpr long kHighestClassified = 469;

// One row per call: X(number, name, paths), paths as runtime/names/call_args.h writes them.
// clang-format off
#define FANSTORE_UNSERVED_CALLS(X)                                          \
  X(SYS_uselib, uselib, Path(0))                                                   \
  X(SYS_pivot_root, pivot_root, Paths(Path(0), Path(1)))                               \
  X(SYS_chroot, chroot, Path(0))                                                   \
  X(SYS_acct, acct, Path(0))                                                     \
  X(SYS_mount, mount, Path(1)) /* the target; the source may be no path at all */ \
  X(SYS_umount2, umount2, Path(0))                                                  \
  X(SYS_swapon, swapon, Path(0))                                                   \
  X(SYS_swapoff, swapoff, Path(0))                                                  \
  X(SYS_quotactl, quotactl, Path(1))                                                 \
  X(SYS_inotify_add_watch, inotify_add_watch, Path(1))                                        \
  X(SYS_fanotify_mark, fanotify_mark, PathAt(3, 4))                                       \
  X(SYS_name_to_handle_at, name_to_handle_at, PathAt(0, 1))                                   \
  X(kNrOpenTree, open_tree, PathAt(0, 1))                                   \
  X(kNrMoveMount, move_mount, Paths(PathAt(0, 1), PathAt(2, 3)))            \
  X(kNrFspick, fspick, PathAt(0, 1))                                        \
  X(kNrMountSetattr, mount_setattr, PathAt(0, 1))                           \
  X(kNrFchmodat2, fchmodat2, PathAt(0, 1))                                  \
  X(kNrSetxattrat, setxattrat, PathAt(0, 1))                                \
  X(kNrGetxattrat, getxattrat, PathAt(0, 1))                                \
  X(kNrListxattrat, listxattrat, PathAt(0, 1))                              \
  X(kNrRemovexattrat, removexattrat, PathAt(0, 1))                          \
  X(kNrOpenTreeAttr, open_tree_attr, PathAt(0, 1))                          \
  X(kNrFileGetattr, file_getattr, PathAt(0, 1))                             \
  X(kNrFileSetattr, file_setattr, PathAt(0, 1))
// clang-format on

// The list as data (for the handler and the tests): up to two (dirfd, path) pairs; a
// dirfd of -1 means AT_FDCWD, a path of -1 no second pair.
struct UnservedCall {
  long nr;
  const char* name;
  int dirfd[2];
  int path[2];
};
constexpr UnservedCall Unserved(long nr, const char* name, PathArgs p) {
  return {nr, name, {p.dirfd[0], p.dirfd[1]}, {p.path[0], p.path[1]}};
}
inline constexpr UnservedCall kUnservedCalls[] = {
#define FANSTORE_UNSERVED_ENTRY(nr, name, paths) Unserved(nr, #name, paths),
    FANSTORE_UNSERVED_CALLS(FANSTORE_UNSERVED_ENTRY)
#undef FANSTORE_UNSERVED_ENTRY
};

}  // namespace fanstore::runtime
