// The descriptor side of a virtual fd: close (parking its placeholder for the next open),
// close_range, dup/dup2/dup3, fcntl, ioctl, fstat, and the calls on a virtual fd that
// change nothing (fsync, flock, fadvise) or are refused (writes, fchmod: EROFS/EBADF).
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "base/raw_syscall.h"
#include "base/syscall_numbers.h"
#include "runtime/calls/handlers.h"
#include "runtime/process/fd_table.h"
#include "runtime/process/prefilter_state.h"
#include "runtime/process/state.h"

namespace fanstore::runtime {

using base::RawSyscall6;

HookResult OnClose(const long a[6]) {
  State* s = Get();
  const long fd_arg = Args(SYS_close, a).fd();
  // the runtime's own fds, and parked ones (closed already, to the application)
  if (s->IsReservedFd(fd_arg) || Fds().IsParked(fd_arg)) return Err(EBADF);
  if (!Fds().Lookup(fd_arg)) return kPassToKernel;
  if (s->InVforkChild()) return kPassToKernel;  // (its fd table is its own; the memory is not)
  const int fd = static_cast<int>(fd_arg);
  const bool parkable = Fds().CloexecSure(fd);
  Fds().Unbind(fd);
  if (parkable && Fds().Park(fd)) return Handled(0);  // the placeholder stays, for the next open
  NoteFdFreed(fd);
  return kPassToKernel;  // the kernel closes the placeholder
}

HookResult OnCloseRange(const long a[6]) {
  State* s = Get();
  unsigned long first = static_cast<unsigned long>(a[0]);
  unsigned long last = static_cast<unsigned long>(a[1]);
  if (first > last) return Err(EINVAL);
  if (!(a[2] & CLOSE_RANGE_CLOEXEC) && !s->InVforkChild()) {
    for (unsigned long fd = first; fd <= last && fd < static_cast<unsigned long>(kMaxFds); ++fd) {
      if (Fds().DescOf(static_cast<long>(fd)) >= 0) Fds().Unbind(static_cast<int>(fd));
      Fds().Unpark(static_cast<int>(fd));  // (the kernel closes its placeholder)
    }
    NoteFdFreed(static_cast<long>(std::min<unsigned long>(first, kMaxFds)));
  }
  if (s->reserved_lo > 0 && last >= static_cast<unsigned long>(s->reserved_lo)) {
    if (first >= static_cast<unsigned long>(s->reserved_lo)) return Handled(0);
    last = static_cast<unsigned long>(s->reserved_lo - 1);
  }
  return Handled(
      RawSyscall6(SYS_close_range, static_cast<long>(first), static_cast<long>(last), a[2]));
}

HookResult OnDup(long nr, const long a[6]) {
  State* s = Get();
  const long old = a[0];
  const int d = Fds().DescOf(old);
  if (nr == SYS_dup) {
    if (d < 0) return kPassToKernel;
    const long fd = RawSyscall6(SYS_dup, old);
    if (fd >= 0) Fds().Bind(static_cast<int>(fd), d);
    return Handled(fd);
  }
  const long target = a[1];
  if (s->IsReservedFd(target) || s->IsReservedFd(old) || Fds().IsParked(old)) return Err(EBADF);
  // onto a parked fd: free to the application, so the placeholder is taken back first
  if (Fds().IsParked(target) && !s->InVforkChild()) Fds().Unpark(static_cast<int>(target));
  if (d < 0 && Fds().DescOf(target) < 0) return kPassToKernel;
  if (nr == SYS_dup2 && old == target)
    return Handled(RawSyscall6(SYS_fcntl, old, F_GETFD) < 0 ? -EBADF : target);
  const long fd = RawSyscall6(nr, old, target, a[2]);
  if (fd < 0 || s->InVforkChild()) return Handled(fd);
  if (d >= 0)
    Fds().Bind(static_cast<int>(fd), d);
  else
    Fds().Unbind(static_cast<int>(fd));
  return Handled(fd);
}

HookResult OnFcntl(const long a[6]) {
  const long fd = Args(SYS_fcntl, a).fd();
  OpenFile* f = Fds().Lookup(fd);
  if (!f) {
    if (Get()->IsReservedFd(fd) || Fds().IsParked(fd)) return Err(EBADF);
    return kPassToKernel;
  }
  const int cmd = static_cast<int>(a[1]);
  switch (cmd) {
    case F_DUPFD:
    case F_DUPFD_CLOEXEC: {
      const long fd = RawSyscall6(SYS_fcntl, a[0], cmd, a[2]);
      if (fd >= 0 && !Get()->InVforkChild()) Fds().Bind(static_cast<int>(fd), Fds().DescOf(a[0]));
      return Handled(fd);
    }
    case F_GETFL:
      return Handled((f->flags.load() & ~(O_CREAT | O_EXCL | O_NOCTTY | O_TRUNC | O_CLOEXEC)) |
                     O_LARGEFILE);
    case F_SETFL: {
      const int settable = O_APPEND | O_NONBLOCK | O_ASYNC | O_DIRECT | O_NOATIME;
      int v = f->flags.load();
      f->flags.store((v & ~settable) | (static_cast<int>(a[2]) & settable));
      return Handled(0);
    }
    case F_GETFD:
      return kPassToKernel;  // the placeholder carries FD_CLOEXEC
    case F_SETFD: {
      const long rc = RawSyscall6(SYS_fcntl, a[0], F_SETFD, a[2]);
      if (rc == 0 && !Get()->InVforkChild())
        Fds().SetCloexecSure(static_cast<int>(a[0]), a[2] & FD_CLOEXEC);
      return Handled(rc);
    }
    case F_GETLK:
    case F_SETLK:
    case F_SETLKW:
    case F_OFD_GETLK:
    case F_OFD_SETLK:
    case F_OFD_SETLKW: {
      auto* fl = reinterpret_cast<struct flock*>(a[2]);
      if (cmd == F_GETLK || cmd == F_OFD_GETLK) {
        fl->l_type = F_UNLCK;
        return Handled(0);
      }
      return Handled(fl->l_type == F_WRLCK ? -EBADF : 0);  // read locks on read-only data
    }
    default:
      return Err(EINVAL);
  }
}

HookResult OnIoctl(const long a[6]) {
  const unsigned long req = static_cast<unsigned long>(a[1]);
  const Args args(SYS_ioctl, a);
  // (cp falls back to copying)
  if (req == FICLONE && Fds().Lookup(args[kCloneSourceArg])) return Err(EXDEV);
  if (req == FICLONERANGE) {
    const auto* r = reinterpret_cast<const file_clone_range*>(args[kCloneSourceArg]);
    if (r && Fds().Lookup(r->src_fd)) return Err(EXDEV);
  }
  OpenFile* f = Fds().Lookup(args.fd());
  if (!f) return kPassToKernel;
  if (req == FIOCLEX || req == FIONCLEX) {  // the placeholder (O_PATH: no ioctl) carries it
    const long rc = RawSyscall6(SYS_fcntl, a[0], F_SETFD, req == FIOCLEX ? FD_CLOEXEC : 0);
    if (rc == 0 && !Get()->InVforkChild())
      Fds().SetCloexecSure(static_cast<int>(a[0]), req == FIOCLEX);
    return Handled(rc);
  }
  if (req == FIONREAD && !IsDirEntry(f->entry)) {
    const int64_t left = static_cast<int64_t>(Get()->ns.entry(f->entry).size) - f->offset.load();
    *reinterpret_cast<int*>(a[2]) = static_cast<int>(left > 0 ? left : 0);
    return Handled(0);
  }
  return Err(ENOTTY);
}

HookResult OnFstat(const long a[6]) {
  OpenFile* f = Fds().Lookup(Args(SYS_fstat, a).fd());
  if (!f) return kPassToKernel;
  FillStat(f->entry, reinterpret_cast<struct stat*>(a[1]));
  return Handled(0);
}

HookResult OnFdMisc(long nr, const long a[6]) {
  OpenFile* f = Fds().Lookup(Args(nr, a).fd());
  if (!f) return kPassToKernel;
  switch (nr) {
    case SYS_fadvise64:
    case SYS_readahead:
    case SYS_fsync:
    case SYS_fdatasync:
    case SYS_syncfs:
      return Handled(0);
    case SYS_flock: {
      // Granted at once, shared or exclusive: the data never changes, so a lock has nothing
      // to protect (HDF5 takes one on every file it opens). LOCK_MAND is accepted and
      // ignored, as Linux does since 5.15.
      const long op = a[1];
      if (op & 32 /* LOCK_MAND */) return Handled(0);
      const long type = op & ~long{LOCK_NB};
      return Handled(type == LOCK_SH || type == LOCK_EX || type == LOCK_UN ? 0 : -EINVAL);
    }
    case SYS_sync_file_range: {  // (fd, offset, nbytes, flags): nothing is ever dirty
      const unsigned long valid =
          SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER;
      const long off = a[1], end = static_cast<long>(static_cast<unsigned long>(a[1]) +
                                                     static_cast<unsigned long>(a[2]));
      if ((static_cast<unsigned long>(a[3]) & ~valid) || off < 0 || end < 0 || end < off)
        return Err(EINVAL);
      return Handled(0);
    }
    case SYS_fgetxattr:
      return Err(ENODATA);
    case SYS_flistxattr:
      return Handled(0);
    case SYS_ftruncate:
      return Err(EINVAL);  // not open for writing
    case SYS_write:
    case SYS_pwrite64:
    case SYS_writev:
    case SYS_pwritev:
    case SYS_pwritev2:
      return Err(EBADF);
    default:  // fchmod, fchown, fsetxattr, fremovexattr
      return Err(EROFS);
  }
}

}  // namespace fanstore::runtime
