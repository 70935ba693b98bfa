// The path-taking system calls the runtime does not serve: mount and namespace calls,
// inotify and fanotify marks, file handles, the *xattrat and file_*attr calls, and
// fchmodat2 and whatever Linux adds next. On a dataset path the kernel would act on
// fanrun's skeleton directories (chmod them, mount over them, create in them), so each of
// these is refused there with EROFS, the answer of a read-only file system; anywhere
// else it goes to the kernel untouched.
// kHighestClassified is the last x86-64 system call number this table was checked
// against: a newer one (tests/runtime/unserved_calls_test.cc reads the system's headers) must
// be looked at and added here if it takes a path.
// Thread-safety: constant data.
#pragma once

namespace fanstore::runtime {

// Numbers newer than some kernel headers in use (Debian 12's end at 450).
inline constexpr long kNrOpenTree = 428, kNrMoveMount = 429, kNrFspick = 433, kNrMountSetattr = 442,
                      kNrFchmodat2 = 452, kNrSetxattrat = 463, kNrGetxattrat = 464,
                      kNrListxattrat = 465, kNrRemovexattrat = 466, kNrOpenTreeAttr = 467,
                      kNrFileGetattr = 468, kNrFileSetattr = 469;
inline constexpr long kHighestClassified = 469;

// One call's path arguments: up to two (dirfd, path) pairs; a dirfd of -1 means AT_FDCWD.
struct UnservedCall {
  long nr;
  const char* name;
  int dirfd[2];
  int path[2];  // -1: no second path
};

inline constexpr UnservedCall kUnservedCalls[] = {
    {134, "uselib", {-1, -1}, {0, -1}},
    {155, "pivot_root", {-1, -1}, {0, 1}},
    {161, "chroot", {-1, -1}, {0, -1}},
    {163, "acct", {-1, -1}, {0, -1}},
    {165, "mount", {-1, -1}, {1, -1}},  // (the target; the source may be no path at all)
    {166, "umount2", {-1, -1}, {0, -1}},
    {167, "swapon", {-1, -1}, {0, -1}},
    {168, "swapoff", {-1, -1}, {0, -1}},
    {179, "quotactl", {-1, -1}, {1, -1}},
    {254, "inotify_add_watch", {-1, -1}, {1, -1}},
    {301, "fanotify_mark", {3, -1}, {4, -1}},
    {303, "name_to_handle_at", {0, -1}, {1, -1}},
    {kNrOpenTree, "open_tree", {0, -1}, {1, -1}},
    {kNrMoveMount, "move_mount", {0, 2}, {1, 3}},
    {kNrFspick, "fspick", {0, -1}, {1, -1}},
    {kNrMountSetattr, "mount_setattr", {0, -1}, {1, -1}},
    {kNrFchmodat2, "fchmodat2", {0, -1}, {1, -1}},
    {kNrSetxattrat, "setxattrat", {0, -1}, {1, -1}},
    {kNrGetxattrat, "getxattrat", {0, -1}, {1, -1}},
    {kNrListxattrat, "listxattrat", {0, -1}, {1, -1}},
    {kNrRemovexattrat, "removexattrat", {0, -1}, {1, -1}},
    {kNrOpenTreeAttr, "open_tree_attr", {0, -1}, {1, -1}},
    {kNrFileGetattr, "file_getattr", {0, -1}, {1, -1}},
    {kNrFileSetattr, "file_setattr", {0, -1}, {1, -1}},
};

}  // namespace fanstore::runtime
