// The path calls other than open on dataset paths: stat and statx, access, readlink,
// chdir and getcwd, statfs, the xattr reads and exec; each answers from the image, goes to
// the kernel with the path rewritten when it leaves the dataset, or is the kernel's.
// Thread-safety: any thread.
#include <fcntl.h>
#include <linux/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/raw_syscall.h"
#include "base/syscall_numbers.h"
#include "intercept/exec_env.h"
#include "meta/format.h"
#include "runtime/calls/handlers.h"
#include "runtime/calls/inherit.h"
#include "runtime/process/fd_table.h"
#include "runtime/process/permission.h"
#include "runtime/process/prefilter_state.h"
#include "runtime/process/state.h"

namespace fanstore::runtime {

using base::RawSyscall6;
using meta::Kind;

namespace {

HookResult FromResolved(const Resolved& r, long nr, const long a[6], int path_arg) {
  if (r.kind == Resolved::kError) return Err(r.err);
  if (r.kind == Resolved::kRewritten) return Handled(WithPath(nr, a, path_arg, r.path.c_str()));
  return kPassToKernel;
}

}  // namespace

bool IsSymlink(uint32_t e) {
  return Get()->ns.entry(e).kind == static_cast<uint8_t>(Kind::kSymlink);
}

Resolved ResolveParent(long dirfd, const char* path) {
  std::string p(path);
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.rfind('/');
  if (slash == std::string::npos) return Resolve(dirfd, ".", kFollow);
  return Resolve(dirfd, slash == 0 ? "/" : p.substr(0, slash).c_str(), kFollow);
}

bool IsDirEntry(uint32_t entry) {
  return Get()->ns.entry(entry).kind == static_cast<uint8_t>(Kind::kDir);
}

void FillStat(uint32_t idx, struct stat* st) {
  FillStatOf(idx, st);
}

long WithPath(long nr, const long a[6], int path_arg, const char* path) {
  long b[6] = {a[0], a[1], a[2], a[3], a[4], a[5]};
  b[path_arg] = reinterpret_cast<long>(path);
  // dirfd-relative calls get an absolute path: the dirfd no longer matters.
  return RawSyscall6(nr, b[0], b[1], b[2], b[3], b[4], b[5]);
}

HookResult OnStatPath(long nr, const long a[6]) {
  // stat(path, buf) lstat(path, buf) newfstatat(dirfd, path, buf, flags)
  const Args args(nr, a);
  int rflags = nr == SYS_lstat ? 0 : kFollow;
  if (args.at()) {
    const long flags = args.after_path(2);
    if (flags & AT_SYMLINK_NOFOLLOW) rflags = 0;
    if (flags & AT_EMPTY_PATH) rflags |= kEmptyOk;
  }
  const Resolved r = Resolve(args.dirfd(), args.path(), rflags);
  if (r.kind != Resolved::kVirtual) return FromResolved(r, nr, a, args.path_arg());
  FillStat(r.entry, reinterpret_cast<struct stat*>(args.after_path(1)));
  return Handled(0);
}

HookResult OnStatx(const long a[6]) {
  // statx(dirfd, path, flags, mask, buf)
  const Args args(SYS_statx, a);
  const long flags = args.after_path(1);
  int rflags = (flags & AT_SYMLINK_NOFOLLOW) ? 0 : kFollow;
  if (flags & AT_EMPTY_PATH) rflags |= kEmptyOk;
  const Resolved r = Resolve(args.dirfd(), args.path(), rflags);
  if (r.kind != Resolved::kVirtual) return FromResolved(r, SYS_statx, a, args.path_arg());
  FillStatxOf(r.entry, reinterpret_cast<void*>(args.after_path(3)));
  return Handled(0);
}

HookResult OnAccess(long nr, const long a[6]) {
  // access(path, mode) faccessat(dirfd, path, mode) faccessat2(dirfd, path, mode, flags)
  const Args args(nr, a);
  const int mode = static_cast<int>(args.after_path(1));
  const long flags = nr == SYS_faccessat2 ? args.after_path(2) : 0;
  int rflags = kFollow;
  if (flags & AT_SYMLINK_NOFOLLOW) rflags = 0;
  if (flags & AT_EMPTY_PATH) rflags |= kEmptyOk;
  const Resolved r = Resolve(args.dirfd(), args.path(), rflags);
  if (r.kind != Resolved::kVirtual) return FromResolved(r, nr, a, args.path_arg());
  if (mode & W_OK) return Err(EROFS);
  // access(2) asks with the real ids (AT_EACCESS: the effective ones); the walk that
  // reached the entry searched with the fs ids, which equal the effective ones.
  Caller caller((flags & AT_EACCESS) ? Caller::Ids::kEffective : Caller::Ids::kReal);
  const unsigned want = ((mode & R_OK) ? meta::kMayRead : 0) | ((mode & X_OK) ? meta::kMayExec : 0);
  return Handled(caller.May(Get()->ns.entry(r.entry), want) ? 0 : -EACCES);
}

HookResult OnReadlink(long nr, const long a[6]) {
  // readlink(path, buf, size) readlinkat(dirfd, path, buf, size)
  const Args args(nr, a);
  const char* path = args.path();
  char* buf = reinterpret_cast<char*>(args.after_path(1));
  const long size = args.after_path(2);
  if (size <= 0) return kPassToKernel;
  // /proc/self/fd/N (or /dev/fd/N, ...) of a virtual fd names the member under the mount point.
  std::string_view rest;
  if (const int fd = path ? FdLink(path, &rest) : -1; fd >= 0 && rest.empty()) {
    const std::string p = MountPath(Fds().Lookup(fd)->entry);
    const size_t n = std::min<size_t>(p.size(), static_cast<size_t>(size));
    std::memcpy(buf, p.data(), n);
    return Handled(static_cast<long>(n));
  }
  const Resolved r = Resolve(args.dirfd(), path, 0);
  if (r.kind != Resolved::kVirtual) return FromResolved(r, nr, a, args.path_arg());
  if (!IsSymlink(r.entry)) return Err(EINVAL);
  const std::string_view t = Get()->ns.target(Get()->ns.entry(r.entry));
  const size_t n = std::min<size_t>(t.size(), static_cast<size_t>(size));
  std::memcpy(buf, t.data(), n);
  return Handled(static_cast<long>(n));
}

HookResult OnChdir(long nr, const long a[6]) {
  // chdir(path) fchdir(fd)
  const Args args(nr, a);
  if (Get()->InVforkChild())
    return Handled(nr == SYS_chdir ? ChdirInVforkChild(args.path()) : RawSyscall6(nr, args.fd()));
  Resolved r;
  if (nr == SYS_fchdir) {
    OpenFile* f = Fds().Lookup(args.fd());
    if (!f) {
      const long rc = RawSyscall6(SYS_fchdir, args.fd());
      if (rc == 0) SetCwdNative();
      return Handled(rc);
    }
    r.kind = Resolved::kVirtual;
    r.entry = f->entry;
  } else {
    r = Resolve(AT_FDCWD, args.path(), kFollow);
    if (r.kind == Resolved::kError) return Err(r.err);
    if (r.kind != Resolved::kVirtual) {
      const char* native = r.kind == Resolved::kRewritten ? r.path.c_str() : args.path();
      const long rc = RawSyscall6(SYS_chdir, reinterpret_cast<long>(native));
      if (rc == 0) SetCwdNative();
      return Handled(rc);
    }
  }
  if (!IsDirEntry(r.entry)) return Err(ENOTDIR);
  if (!Caller().May(Get()->ns.entry(r.entry), meta::kMayExec)) return Err(EACCES);
  // Follow natively too when the directory exists there (fanrun's skeleton), so children
  // inherit a kernel cwd that means the same place.
  RawSyscall6(SYS_chdir, reinterpret_cast<long>(MountPath(r.entry).c_str()));
  SetCwdVirtual(r.entry);
  return Handled(0);
}

HookResult OnGetcwd(const long a[6]) {
  uint32_t cwd;
  if (!CwdIsVirtual(&cwd)) return kPassToKernel;
  const std::string p = MountPath(cwd);
  if (p.size() + 1 > static_cast<size_t>(a[1])) return Err(ERANGE);
  std::memcpy(reinterpret_cast<char*>(a[0]), p.c_str(), p.size() + 1);
  return Handled(static_cast<long>(p.size() + 1));
}

HookResult OnStatfs(long nr, const long a[6]) {
  // statfs(path, buf) fstatfs(fd, buf)
  const Args args(nr, a);
  uint32_t entry;
  if (nr == SYS_fstatfs) {
    OpenFile* f = Fds().Lookup(args.fd());
    if (!f) return kPassToKernel;
    entry = f->entry;
  } else {
    const Resolved r = Resolve(AT_FDCWD, args.path(), kFollow);
    if (r.kind != Resolved::kVirtual) return FromResolved(r, nr, a, args.path_arg());
    entry = r.entry;
  }
  (void)entry;
  // Sized like a read-only image (squashfs): the members' stored bytes in blocks, all used.
  static std::atomic<uint64_t> blocks{UINT64_MAX};
  uint64_t b = blocks.load(std::memory_order_relaxed);
  if (b == UINT64_MAX) {  // once per process: one pass over the entries (~1 ms per 100 k)
    const meta::NamespaceView& ns = Get()->ns;
    b = 0;
    for (uint32_t i = 0; i < ns.size(); ++i)
      if (ns.entry(i).kind == static_cast<uint8_t>(Kind::kFile))
        b += (ns.entry(i).stored_size + 4095) / 4096;
    blocks.store(b, std::memory_order_relaxed);
  }
  auto* s = reinterpret_cast<struct statfs*>(a[1]);
  std::memset(s, 0, sizeof *s);
  s->f_type = 0x46414E53;  // "FANS"
  s->f_bsize = 4096;
  s->f_frsize = 4096;
  s->f_blocks = static_cast<fsblkcnt_t>(b);
  s->f_files = static_cast<fsfilcnt_t>(Get()->ns.size());
  s->f_namelen = 255;
  s->f_flags = ST_RDONLY | ST_NOSUID | ST_NODEV;
  return Handled(0);
}

HookResult OnXattrPath(long nr, const long a[6]) {
  const bool nofollow =
      nr == SYS_lgetxattr || nr == SYS_llistxattr || nr == SYS_lsetxattr || nr == SYS_lremovexattr;
  const Args args(nr, a);
  const Resolved r = Resolve(AT_FDCWD, args.path(), nofollow ? 0 : kFollow);
  if (r.kind != Resolved::kVirtual) return FromResolved(r, nr, a, args.path_arg());
  switch (nr) {
    case SYS_getxattr:
    case SYS_lgetxattr:
      return Err(ENODATA);
    case SYS_listxattr:
    case SYS_llistxattr:
      return Handled(0);
    default:
      return Err(EROFS);  // set/remove
  }
}

HookResult OnExec(long nr, const long a[6]) {
  // execve(path, argv, envp)  execveat(dirfd, path, argv, envp, flags)
  // The exec policy (LD_PRELOAD and FANSTORE_* follow the program) applies to every exec,
  // and virtual fds that survive it are passed on (runtime/calls/inherit.h). Nothing here
  // allocates on the way to a native program: vfork children come through this path.
  const Args args(nr, a);
  const int path_arg = args.path_arg();
  const int env_arg = path_arg + 2, argv_arg = path_arg + 1;
  char* out[4096];
  char scratch[8192];
  char fds[4096];
  char cwd[80];
  const bool vfork_child = Get()->InVforkChild();
  const bool passing = EncodeForExec(fds, sizeof fds, vfork_child);
  const bool cwd_passed = EncodeCwdForExec(cwd, sizeof cwd);
  char* const* env = intercept::FixExecEnv(reinterpret_cast<char* const*>(a[env_arg]), out, 4096,
                                           scratch, sizeof scratch);
  env = WithInheritVars(env, out, 4096, passing ? fds : nullptr, cwd_passed ? cwd : nullptr);
  long b[6] = {a[0], a[1], a[2], a[3], a[4], a[5]};
  b[env_arg] = reinterpret_cast<long>(env);
  // A vfork child cannot resolve (that may allocate): a virtual program is not found there.
  if (vfork_child) return Handled(ExecPassingFds(nr, b, passing));
  const long flags = args.at() ? args.after_path(3) : 0;
  int rflags = (flags & AT_SYMLINK_NOFOLLOW) ? 0 : kFollow;
  if (flags & AT_EMPTY_PATH) rflags |= kEmptyOk;
  const Resolved r = Resolve(args.dirfd(), args.path(), rflags);
  if (r.kind == Resolved::kError) return Err(r.err);
  if (r.kind == Resolved::kRewritten) b[path_arg] = reinterpret_cast<long>(r.path.c_str());
  if (r.kind != Resolved::kVirtual) return Handled(ExecPassingFds(nr, b, passing));
  const meta::ImageEntry& e = Get()->ns.entry(r.entry);
  if (IsDirEntry(r.entry) || !Caller().May(e, meta::kMayExec)) return Err(EACCES);
  if (IsSymlink(r.entry)) return Err(ELOOP);
  // The program's bytes in a memfd, executed in place.
  const long mfd = MemfdOf(r.entry, false);
  if (mfd < 0) return Handled(mfd);
  const long c[6] = {mfd, reinterpret_cast<long>(""), a[argv_arg], b[env_arg], AT_EMPTY_PATH, 0};
  long rc = ExecPassingFds(SYS_execveat, c, passing);
  if (rc == -ENOSYS) {  // no execveat (qemu-user; Linux before 3.19): the fd's /proc link
    char link[40];
    std::snprintf(link, sizeof link, "/proc/self/fd/%ld", mfd);
    const long d[6] = {reinterpret_cast<long>(link), c[2], c[3], 0, 0, 0};
    rc = ExecPassingFds(SYS_execve, d, passing);
  }
  RawSyscall6(SYS_close, mfd);  // only reached when the exec failed
  return Handled(rc);
}

}  // namespace fanstore::runtime
