// The prefilter's interest set: for each system call, whether its arguments could
// concern the dataset (a virtual fd, a path that may lead under the mount point, the cwd),
// read from its row of runtime/names/call_table.h (tests/runtime/served_calls_test.cc holds
// an independent table of where each call takes what). Part of runtime/calls/prefilter.cc's
// translation unit (it alone includes this; prefilter_paths.h, included below, refuses any
// other includer).
// Thread-safety: pure functions of the call and the prefilter's state (read only); any
// thread, signal handlers included.
#pragma once

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/syscall.h>

#include "runtime/calls/prefilter_paths.h"
#include "runtime/names/call_table.h"

namespace fanstore::runtime {
namespace {

// Whether the (dirfd D, path P) pair of a call with flags F may lead into the dataset.
template <unsigned F, int D, int P>
[[gnu::always_inline]] inline bool PathWanted(const long a[6]) noexcept {
  const long dirfd = D < 0 ? AT_FDCWD : a[D < 0 ? 0 : D];
  return MaybeOurs(dirfd, a[P]) || ((F & kProcPath) && IsProc(a[P])) ||
         ((F & kDirfdItself) && D >= 0 && VirtualFd(dirfd));
}

// Whether a call with row R is the runtime's. R is a template argument, so each case of
// Classify compiles to the few checks its row asks for, with no load of the table (a page
// more to touch after every system call, which a VM pays in TLB refills).
template <CallRow R>
[[gnu::always_inline]] inline int WantsOf(const long a[6]) noexcept {
  // (constexpr copies of the row's fields: the row itself is never addressed, so no object
  // of it is emitted, in any build)
  constexpr unsigned f = R.flags, fds = R.fds;
  constexpr int d0 = R.paths.dirfd[0], p0 = R.paths.path[0];
  constexpr int d1 = R.paths.dirfd[1], p1 = R.paths.path[1];
  if constexpr ((f & kListed) == 0) {
    return 0;
  } else if constexpr (f & kAlways) {
    return 1;
  } else if constexpr (f & kVirtualCwd) {  // (2: a native cwd beside the mount point)
    return g_prefilter.cwd_virtual.load(std::memory_order_relaxed) == 1;
  } else if constexpr (f & kAnyFdOpen) {
    return g_prefilter.fd_count->load(std::memory_order_relaxed) > 0;
  } else {
    if constexpr (fds != 0) {
      if constexpr (f & kMapFile)
        if (a[3] & 0x20 /* MAP_ANONYMOUS */) return 0;
      for (unsigned i = 0; i < 6; ++i)
        if (((fds >> i) & 1) && (VirtualFd(a[i]) || ((f & kOwnFdCheck) && Reserved(a[i]))))
          return 1;
      if constexpr (f & kClone)
        return (a[1] == static_cast<long>(FICLONE) && VirtualFd(a[kCloneSourceArg])) ||
               a[1] == static_cast<long>(FICLONERANGE);
    }
    if constexpr (p0 >= 0)
      if (PathWanted<f, d0, p0>(a)) return 1;
    if constexpr (p1 >= 0)
      if (PathWanted<f, d1, p1>(a)) return 1;
    return 0;
  }
}

// What the prefilter does with call nr, decided by its row: kWanted when its arguments may
// concern the dataset; else the position of its path argument when runtime/paths/skeleton.h
// covers it (SkeletonPathArg); else -1. One switch whose cases are the rows, as constants:
// the code is what a hand-written switch would be, with no load of the table.
inline constexpr int kWanted = 16;
[[gnu::always_inline]] inline int Classify(long nr, const long a[6]) noexcept {
  switch (nr) {
#define FANSTORE_SERVED_CASE(number, handler_, rule_, fds_, paths_, flags_)          \
  case number: {                                                                     \
    constexpr CallRow kRow = RowOf(number);                                          \
    constexpr int kSkeletonArg = (kRow.flags & kSkeleton) ? kRow.paths.path[0] : -1; \
    return WantsOf<kRow>(a) ? kWanted : kSkeletonArg;                                \
  }
    FANSTORE_SERVED_CALLS(FANSTORE_SERVED_CASE)
#undef FANSTORE_SERVED_CASE
#define FANSTORE_UNSERVED_CASE(number, name_, paths_) \
  case number:                                        \
    return WantsOf<UnservedRow(paths_)>(a) ? kWanted : -1;
    FANSTORE_UNSERVED_CALLS(FANSTORE_UNSERVED_CASE)
#undef FANSTORE_UNSERVED_CASE
    default:
      return -1;
  }
}

}  // namespace
}  // namespace fanstore::runtime
