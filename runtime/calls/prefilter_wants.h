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

FANSTORE_HOT_TEXT int Wants(long nr, const long a[6]) noexcept {
  const CallRow& r = RowOf(nr);
  const unsigned f = r.flags;
  if (!(f & kListed)) return 0;
  if (f & kAlways) return 1;
  if (f & kVirtualCwd)  // (2: a native cwd beside the mount point, the kernel's to name)
    return g_prefilter.cwd_virtual.load(std::memory_order_relaxed) == 1;
  if (f & kAnyFdOpen) return g_prefilter.fd_count->load(std::memory_order_relaxed) > 0;
  if (r.fds) {
    if ((f & kMapFile) && (a[3] & 0x20 /* MAP_ANONYMOUS */)) return 0;
    for (unsigned m = r.fds, i = 0; m; m >>= 1, ++i)
      if ((m & 1) && (VirtualFd(a[i]) || ((f & kOwnFdCheck) && Reserved(a[i])))) return 1;
    if (f & kClone)
      return (a[1] == static_cast<long>(FICLONE) && VirtualFd(a[2])) ||
             a[1] == static_cast<long>(FICLONERANGE);
  }
  for (int k = 0; k < 2 && r.paths.path[k] >= 0; ++k) {
    const int d = r.paths.dirfd[k];
    const long dirfd = d < 0 ? AT_FDCWD : a[d];
    const long path = a[r.paths.path[k]];
    if (MaybeOurs(dirfd, path) || ((f & kProcPath) && IsProc(path)) ||
        ((f & kDirfdItself) && d >= 0 && VirtualFd(dirfd)))
      return 1;
  }
  return 0;
}

}  // namespace
}  // namespace fanstore::runtime
