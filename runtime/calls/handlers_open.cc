// open, openat, creat and openat2 on dataset paths: a virtual fd for an entry, EROFS for
// what would write, openat2's RESOLVE_* rules as the kernel applies them.
// Thread-safety: any thread (as runtime/calls/handlers.h); the fd table is lock-free.
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <string_view>

#include "base/raw_syscall.h"
#include "base/syscall_numbers.h"
#include "meta/format.h"
#include "runtime/calls/handlers.h"
#include "runtime/process/fd_table.h"
#include "runtime/process/permission.h"
#include "runtime/process/prefilter_state.h"
#include "runtime/process/state.h"

namespace fanstore::runtime {

using base::RawSyscall6;

long OpenVirtual(uint32_t entry, int flags) {
  // A parked placeholder (runtime/process/fd_table.h) when one is the lowest free number; else a
  // duplicate of one O_PATH fd on /dev/null (cheaper than a path lookup per open), whose
  // template lives in the reserved range.
  const bool cloexec = flags & O_CLOEXEC;
  const int hole = g_prefilter.low_hole.load(std::memory_order_relaxed);
  long fd = Fds().TakeParked(hole);
  if (fd >= 0 && !cloexec && RawSyscall6(SYS_fcntl, fd, F_SETFD, 0) < 0) {
    RawSyscall6(SYS_close, fd);
    fd = -1;
  }
  if (fd < 0) {
    static std::atomic<long> tmpl{-1};
    long t = tmpl.load(std::memory_order_acquire);
    if (t < 0) {
      const long raw = RawSyscall6(SYS_openat, AT_FDCWD, reinterpret_cast<long>("/dev/null"),
                                   O_PATH | O_CLOEXEC);
      if (raw < 0) return raw;
      t = RawSyscall6(SYS_fcntl, raw, F_DUPFD_CLOEXEC,
                      Get()->reserved_lo + static_cast<long>(Get()->parts.size()) + 1);
      RawSyscall6(SYS_close, raw);
      if (t < 0) return t;
      long expected = -1;
      if (!tmpl.compare_exchange_strong(expected, t)) {
        RawSyscall6(SYS_close, t);
        t = expected;
      }
    }
    fd = RawSyscall6(SYS_fcntl, t, cloexec ? F_DUPFD_CLOEXEC : F_DUPFD, 0);
    if (fd < 0) return fd;
    // The kernel gave its lowest free number: none below it is free now.
    int was = hole;
    while (was <= fd && !g_prefilter.low_hole.compare_exchange_weak(was, static_cast<int>(fd) + 1,
                                                                    std::memory_order_relaxed)) {
    }
  }
  if (fd >= kMaxFds || Get()->IsReservedFd(fd)) {
    RawSyscall6(SYS_close, fd);
    return -EMFILE;
  }
  const int d = Fds().NewDesc(entry, flags);
  if (d < 0) {
    if (!cloexec || !Fds().Park(static_cast<int>(fd))) RawSyscall6(SYS_close, fd);
    return d;
  }
  Fds().Bind(static_cast<int>(fd), d);
  Fds().SetCloexecSure(static_cast<int>(fd), cloexec);
  return fd;
}

namespace {

// open, openat, creat and openat2 once their arguments are decoded: the call `nr` itself
// goes to the kernel for a native path, and with the path rewritten (argument `path_arg`)
// for one that leaves the dataset.
HookResult OpenPath(long nr, const long a[6], int path_arg, long dirfd, const char* path,
                    int flags) {
  const bool nofollow = flags & (O_NOFOLLOW | O_PATH);
  const Resolved r = Resolve(dirfd, path, nofollow ? 0 : kFollow);
  if (r.kind == Resolved::kNative) return kPassToKernel;
  if (r.kind == Resolved::kRewritten) return Handled(WithPath(nr, a, path_arg, r.path.c_str()));
  if ((flags & O_TMPFILE) == O_TMPFILE && (flags & O_ACCMODE) == O_RDONLY) return Err(EINVAL);
  if (r.kind == Resolved::kError) {
    if (r.err == ENOENT && (flags & O_CREAT)) {
      const Resolved parent = ResolveParent(dirfd, path);
      if (parent.kind == Resolved::kVirtual && IsDirEntry(parent.entry)) return Err(EROFS);
    }
    return Err(r.err);
  }
  const uint32_t e = r.entry;
  if ((flags & O_CREAT) && (flags & O_EXCL)) return Err(EEXIST);
  if (IsSymlink(e) && (flags & O_NOFOLLOW) && !(flags & O_PATH)) return Err(ELOOP);
  const int acc = flags & O_ACCMODE;
  if (IsDirEntry(e)) {
    if ((flags & O_TMPFILE) == O_TMPFILE) return Err(EROFS);  // a file made in the directory
    if (acc != O_RDONLY || (flags & O_TRUNC)) return Err(EISDIR);
  } else {
    if (flags & O_DIRECTORY) return Err(ENOTDIR);
    if (acc != O_RDONLY || (flags & O_TRUNC)) return Err(EROFS);
  }
  // Reading a file or listing a directory needs read permission; O_PATH needs none.
  if (!(flags & O_PATH) && !Caller().May(Get()->ns.entry(e), meta::kMayRead)) return Err(EACCES);
  return Handled(OpenVirtual(e, flags));
}

// openat2's struct open_how (linux/openat2.h), checked as the kernel checks it before it
// resolves anything: 0, or the errno.
int CheckOpenHow(const long a[6], open_how* how) {
  const size_t size = static_cast<size_t>(a[3]);
  if (size < sizeof(open_how)) return EINVAL;
  if (size > 4096) return E2BIG;
  if (!CopyIn(how, a[2], sizeof *how)) return EFAULT;
  char extra[256];  // a larger struct than this kernel's: its tail must be zero
  for (size_t off = sizeof *how; off < size; off += sizeof extra) {
    const size_t n = std::min(sizeof extra, size - off);
    if (!CopyIn(extra, a[2] + static_cast<long>(off), n)) return EFAULT;
    for (size_t i = 0; i < n; ++i)
      if (extra[i]) return E2BIG;
  }
  constexpr uint64_t kValidFlags = O_ACCMODE | O_CREAT | O_EXCL | O_NOCTTY | O_TRUNC | O_APPEND |
                                   O_NONBLOCK | O_DSYNC | O_ASYNC | O_DIRECT | O_LARGEFILE |
                                   O_DIRECTORY | O_NOFOLLOW | O_NOATIME | O_CLOEXEC | O_PATH |
                                   O_TMPFILE | O_SYNC;
  constexpr uint64_t kValidResolve = RESOLVE_NO_XDEV | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS |
                                     RESOLVE_BENEATH | RESOLVE_IN_ROOT | RESOLVE_CACHED;
  if ((how->flags & ~kValidFlags) || (how->resolve & ~kValidResolve)) return EINVAL;
  if ((how->flags & O_CREAT) || (how->flags & O_TMPFILE) == O_TMPFILE) {
    if (how->mode & ~uint64_t{07777}) return EINVAL;
  } else if (how->mode != 0) {
    return EINVAL;
  }
  if ((how->flags & O_PATH) &&
      (how->flags & ~uint64_t{O_DIRECTORY | O_NOFOLLOW | O_PATH | O_CLOEXEC}))
    return EINVAL;
  if ((how->flags & O_TMPFILE) == O_TMPFILE && (how->flags & O_ACCMODE) == O_RDONLY) return EINVAL;
  if ((how->resolve & RESOLVE_BENEATH) && (how->resolve & RESOLVE_IN_ROOT)) return EINVAL;
  if ((how->resolve & RESOLVE_CACHED) && (how->flags & (O_TRUNC | O_CREAT | __O_TMPFILE)))
    return EAGAIN;
  return 0;
}

// Whether resolving `path` from dirfd inside the dataset meets a symlink (what
// RESOLVE_NO_SYMLINKS forbids; a final one only counts when it would be followed): each
// prefix is resolved without following its last component, so the first symlink on the
// way is the one a prefix ends at.
bool MeetsSymlink(long dirfd, const char* path, bool follow_last) {
  const std::string p(path);
  for (size_t end = 0; end != std::string::npos;) {
    end = p.find('/', end + 1);
    const bool last =
        end == std::string::npos || p.find_first_not_of('/', end) == std::string::npos;
    const std::string prefix = last ? p : p.substr(0, end);
    const Resolved r = Resolve(dirfd, prefix.c_str(), 0);
    if (r.kind != Resolved::kVirtual) return false;  // an error or a native part: not ours to say
    if (IsSymlink(r.entry) && (!last || follow_last)) return true;
    if (last) break;
  }
  return false;
}

}  // namespace

HookResult OnOpenat(long nr, const long a[6]) {
  // open(path, flags, mode) openat(dirfd, path, flags, mode) creat(path, mode)
  // openat2(dirfd, path, how, size)
  const Args args(nr, a);
  const long dirfd = args.dirfd();
  const char* path = args.path();
  if (nr == SYS_creat)  // open(path, O_CREAT | O_WRONLY | O_TRUNC, mode)
    return OpenPath(nr, a, args.path_arg(), dirfd, path, O_CREAT | O_WRONLY | O_TRUNC);
  if (nr == SYS_openat2) {
    open_how how{};
    if (const int err = CheckOpenHow(a, &how)) {
      // (a bad how with a native path is the kernel's to refuse, the same way)
      const Resolved r = Resolve(dirfd, path, 0);
      if (r.kind == Resolved::kNative) return kPassToKernel;
      return Err(err);
    }
    const int flags = static_cast<int>(how.flags);
    if (how.resolve & (RESOLVE_BENEATH | RESOLVE_IN_ROOT)) {
      // Resolution scoped to dirfd is not implemented inside the dataset; ENOSYS is what a
      // kernel without openat2 answers, and callers then fall back to openat.
      const Resolved r = Resolve(dirfd, path, 0);
      if (r.kind != Resolved::kNative) return Err(ENOSYS);
      return kPassToKernel;
    }
    std::string_view after_link;
    if ((how.resolve & (RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS)) && path &&
        FdLink(path, &after_link) >= 0 && (!after_link.empty() || !(flags & (O_NOFOLLOW | O_PATH))))
      return Err(ELOOP);  // a /proc/self/fd/N link of a virtual fd is a magic link
    if ((how.resolve & RESOLVE_NO_SYMLINKS) &&
        MeetsSymlink(dirfd, path, !(flags & (O_NOFOLLOW | O_PATH))))
      return Err(ELOOP);
    if (how.resolve & RESOLVE_NO_XDEV) {
      // The dataset is its own file system: a path that enters it from outside (an
      // absolute one, or one from a native directory) or leaves it crosses a mount.
      const Resolved r = Resolve(dirfd, path, (flags & (O_NOFOLLOW | O_PATH)) ? 0 : kFollow);
      if (r.kind == Resolved::kNative) return kPassToKernel;
      uint32_t cwd;
      const bool from_inside =
          path && path[0] != '/' &&
          (static_cast<int>(dirfd) == AT_FDCWD ? CwdIsVirtual(&cwd)
                                               : Fds().Lookup(dirfd) != nullptr);
      if (r.kind == Resolved::kRewritten || !from_inside) return Err(EXDEV);
    }
    return OpenPath(nr, a, args.path_arg(), dirfd, path, flags);
  }
  return OpenPath(nr, a, args.path_arg(), dirfd, path, static_cast<int>(args.after_path(1)));
}

}  // namespace fanstore::runtime
