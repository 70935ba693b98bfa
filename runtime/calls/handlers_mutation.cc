// The calls that would change a dataset path (create, remove, rename, link, chmod, chown,
// truncate, utimes...): EROFS, or what the kernel would answer first (ENOENT, ENOTDIR,
// EEXIST, EACCES...) where that comes before the read-only check.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "base/raw_syscall.h"
#include "base/syscall_numbers.h"
#include "meta/format.h"
#include "runtime/calls/handlers.h"
#include "runtime/names/call_table.h"
#include "runtime/process/fd_table.h"
#include "runtime/process/permission.h"
#include "runtime/process/state.h"

namespace fanstore::runtime {

using base::RawSyscall6;
using meta::Kind;

HookResult OnMutationPath(long nr, const long a[6]) {
  // The first path must exist, or be created (kCreates); runtime/names/call_table.h says
  // where it is and whether its last component is followed.
  const Args args(nr, a);
  const CallRow& row = args.row();
  const int path_arg = args.path_arg();
  if (path_arg < 0) return kPassToKernel;
  const long dirfd = args.dirfd();
  const char* path = args.path();
  const bool creates = row.flags & kCreates;
  const bool nofollow =
      row.flags_arg >= 0 ? (a[row.flags_arg] & AT_SYMLINK_NOFOLLOW) != 0 : !(row.flags & kFollows);
  // unlink, rmdir and rename check the mount for writing before looking the name up (as
  // Linux does on a read-only mount): a name in a dataset directory is EROFS even if missing.
  if (row.flags & kRemoves) {
    const Resolved parent = ResolveParent(dirfd, path);
    if (parent.kind == Resolved::kVirtual) return Err(IsDirEntry(parent.entry) ? EROFS : ENOTDIR);
    if (parent.kind == Resolved::kError) return Err(parent.err);
  }
  const Resolved r = Resolve(dirfd, path, nofollow ? 0 : kFollow);
  if (r.kind == Resolved::kVirtual) return Err(creates ? EEXIST : EROFS);
  if (r.kind == Resolved::kError) {
    if (r.err == ENOENT && creates) {
      const Resolved parent = ResolveParent(dirfd, path);
      if (parent.kind == Resolved::kVirtual) return Err(EROFS);
    }
    return Err(r.err);
  }
  if (r.kind == Resolved::kRewritten) return Handled(WithPath(nr, a, path_arg, r.path.c_str()));
  // The destination of a rename or link inside the dataset.
  if (args.path_arg(1) >= 0) {
    const Resolved d = ResolveParent(args.dirfd(1), args.path(1));
    if (d.kind == Resolved::kVirtual) return Err(EXDEV);
  }
  return kPassToKernel;
}

HookResult OnUtimensat(long nr, const long a[6]) {
  // utimensat(dirfd, path, times, flags); a null path is futimens(dirfd), the fd form.
  // The kernel's order: both times UTIME_OMIT succeed without looking at anything, then
  // flags, then the path, then the times' nanoseconds, then the read-only mount.
  timespec t[2];
  const bool have_times = a[2] != 0;
  if (have_times && !CopyIn(t, a[2], sizeof t)) return Err(EFAULT);
  if (have_times && t[0].tv_nsec == UTIME_OMIT && t[1].tv_nsec == UTIME_OMIT) return Handled(0);
  auto nsec_ok = [](long ns) {
    return ns == UTIME_NOW || ns == UTIME_OMIT || (ns >= 0 && ns < 1000000000);
  };
  const bool bad_times = have_times && (!nsec_ok(t[0].tv_nsec) || !nsec_ok(t[1].tv_nsec));
  const Args args(nr, a);
  const long dirfd = args.dirfd(), flags = a[args.row().flags_arg];
  const char* path = args.path();
  if (!path && static_cast<int>(dirfd) != AT_FDCWD) {
    if (!Fds().Lookup(dirfd)) return kPassToKernel;
    return Err(flags || bad_times ? EINVAL : EROFS);
  }
  if (flags & ~long{AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH}) return kPassToKernel;  // EINVAL
  if (path && !path[0] && (flags & AT_EMPTY_PATH) && Fds().Lookup(dirfd))
    return Err(bad_times ? EINVAL : EROFS);  // the fd itself
  const HookResult r = OnMutationPath(nr, a);
  if (bad_times && r.handled && r.value == -EROFS) return Err(EINVAL);  // an existing member
  return r;
}

}  // namespace fanstore::runtime
