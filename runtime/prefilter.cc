// The runtime's prefilter: decides, before any vector register is saved, whether a call
// can concern the dataset, and answers the stat family itself when a path is found by one
// probe of the image. Compiled with -mgeneral-regs-only -fno-tree-loop-distribute-patterns
// (no vector code, no loops turned into memset/memcpy calls); calls nothing outside this
// file. So it is one translation unit, longer than the runtime's other files, and shares
// code with the rest of the runtime only through headers.
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/syscall.h>

#include "base/raw_syscall.h"
#include "base/syscall_numbers.h"
#include "intercept/clone_mark.h"
#include "meta/format.h"
#include "meta/path_hash.h"
#include "runtime/fast_key.h"
#include "runtime/fd_table.h"
#include "runtime/kernel_names.h"
#include "runtime/prefilter_state.h"
#include "runtime/served_calls.h"
#include "runtime/skeleton.h"
#include "runtime/unserved_calls.h"
#include "runtime/word_scan.h"

namespace fanstore::runtime {

alignas(4096) PrefilterState g_prefilter;

namespace {

// fds are ints to the kernel: only the register's low half counts.
FANSTORE_HOT_TEXT bool VirtualFd(long fd_arg) {
  const int fd = static_cast<int>(fd_arg);
  return fd >= 0 && fd < kMaxFds &&
         (g_prefilter.fd_bits[fd / 64].load(std::memory_order_relaxed) >> (fd % 64) & 1);
}
FANSTORE_HOT_TEXT bool Reserved(long fd) {
  return g_prefilter.reserved_lo > 0 && static_cast<int>(fd) >= g_prefilter.reserved_lo;
}

// Could (dirfd, path) name something under the mount point?
// "/proc/..." or "/dev/..." while a virtual fd is open: maybe a link to it (/proc/self/fd/N,
// /dev/fd/N, /dev/stdin, ...; runtime/resolve.h FdLink), which the kernel would follow to
// its placeholder.
FANSTORE_HOT_TEXT bool MaybeFdLink(const char* s) {
  if (g_prefilter.fd_count->load(std::memory_order_relaxed) == 0 || s[0] != '/') return false;
  return (s[1] == 'p' && s[2] == 'r' && s[3] == 'o' && s[4] == 'c' && s[5] == '/') ||
         (s[1] == 'd' && s[2] == 'e' && s[3] == 'v' && s[4] == '/');
}

// `s` past its leading "./" components ("././/x" -> "x").
FANSTORE_HOT_TEXT const char* SkipDotSlashes(const char* s) {
  while (s[0] == '.' && s[1] == '/') {
    s += 2;
    while (*s == '/') ++s;
  }
  return s;
}

// Whether s[0, n) is one of the components of a spelling of the mount point.
FANSTORE_HOT_TEXT bool IsMountName(const char* s, unsigned n) {
  return IsComponentOfAny(g_prefilter.spellings, kSpellings, s, n);
}

// A relative path from a native directory fd whose first component ("./" skipped) is one
// of the mount point's names (any spelling): it may lead down into the dataset from a
// directory above it (find and du walk by directory fds; runtime/resolve.cc asks the
// kernel where the fd is).
FANSTORE_HOT_TEXT bool MayLeadDown(const char* s) {
  s = SkipDotSlashes(s);
  unsigned n = 0;
  while (s[n] != 0 && s[n] != '/') ++n;
  return IsMountName(s, n);
}

// A relative path whose first component ("./" skipped) is "..": from a native cwd beside
// the mount point, it may lead up and into the dataset ("../data/imagenet/...").
FANSTORE_HOT_TEXT bool LeadsUp(const char* s) {
  s = SkipDotSlashes(s);
  return s[0] == '.' && s[1] == '.' && (s[2] == '/' || s[2] == 0);
}

bool DotDotThenName(const char* s);
bool IsProc(long p);
FANSTORE_HOT_TEXT bool MaybeOurs(long dirfd, long p) {
  const char* s = reinterpret_cast<const char*>(p);
  if (!s) return false;
  if (s[0] == '/') {
    for (const auto& spelling : g_prefilter.spellings)
      if (spelling.len > 0 && UnderPrefix(s, spelling.path, spelling.len)) return true;
    return MaybeFdLink(s) || DotDotThenName(s) ||
           (IsProc(p) && g_prefilter.cwd_virtual.load(std::memory_order_relaxed) == 1);
  }
  if (static_cast<int>(dirfd) == AT_FDCWD) {
    const int c = g_prefilter.cwd_virtual.load(std::memory_order_relaxed);
    return c == 1 || (c == 2 && (LeadsUp(s) || DotDotThenName(s)));
  }
  return VirtualFd(dirfd) || MayLeadDown(s) || DotDotThenName(s);
}

// "/proc/..." (readlink of /proc/self/fd/N names a virtual fd's member).
FANSTORE_HOT_TEXT bool IsProc(long p) {
  const char* s = reinterpret_cast<const char*>(p);
  return s && s[0] == '/' && s[1] == 'p' && s[2] == 'r' && s[3] == 'o' && s[4] == 'c' &&
         s[5] == '/';
}

constexpr long kDev = 0xFA57;

FANSTORE_HOT_TEXT bool NativeDir(long fd) {
  return fd >= 0 && fd < kMaxFds &&
         (g_prefilter.native_dirs[fd / 64].load(std::memory_order_relaxed) >> (fd % 64) & 1);
}

// Whether s is one name ("x": no '/', not empty, "." or "..") other than the last name of
// a spelling of the mount point.
FANSTORE_HOT_TEXT bool OneOtherName(const char* s) {
  unsigned n = 0;
  while (s[n] != 0) {
    if (s[n] == '/') return false;
    ++n;
  }
  if (n == 0 || (s[0] == '.' && (n == 1 || (n == 2 && s[1] == '.')))) return false;
  for (const auto& m : g_prefilter.spellings) {  // the last name of each spelling
    if (m.len == 0) continue;
    unsigned b = m.len;
    while (b > 0 && m.path[b - 1] != '/') --b;
    if (m.len - b == n && EqualBytes(m.path + b, s, n)) return false;
  }
  return true;
}

// Whether openat(a[0], a[1], a[2]) cannot have opened a skeleton directory, by what the
// process knows: one name below a native directory known not to be one, no final link
// followed.
FANSTORE_HOT_TEXT bool ChildOfNativeDir(long nr, const long a[6]) {
  return nr == SYS_openat && (a[2] & O_NOFOLLOW) && NativeDir(a[0]) &&
         OneOtherName(reinterpret_cast<const char*>(a[1]));
}

// Whether the kernel's answer to a covered call other than open cannot come from the
// skeleton: an empty path (the fd itself, or ENOENT), or one name below a native directory
// known not to be the skeleton's (an ENOENT there is that directory's, and the stat family
// needs no permission on the name itself). `du` and `find` stat every name so.
FANSTORE_HOT_TEXT bool KernelsAlone(long nr, int at, const long a[6]) {
  const char* s = reinterpret_cast<const char*>(a[at]);
  if (nr == SYS_open || nr == SYS_openat || !s) return false;
  return s[0] == 0 || (at == 1 && NativeDir(a[0]) && OneOtherName(s));
}

// Whether path s is below a spelling learned from the kernel (runtime/skeleton.h
// LearnedPath; the spelling itself may be the link, the kernel's to answer).
FANSTORE_HOT_TEXT bool UnderLearned(const char* s) {
  if (g_prefilter.learned_count.load(std::memory_order_acquire) == 0 || !s || s[0] != '/')
    return false;
  for (const auto& l : g_prefilter.learned) {
    if (!l.Published()) continue;
    unsigned i = 0;
    while (i < l.key_len && s[i] == l.key[i]) ++i;
    if (i == l.key_len && s[i] == '/') return true;
  }
  return false;
}

// "/repo/code/../data/imagenet/x" (runtime/dot_dot.cc ThroughDotDot).
FANSTORE_HOT_TEXT bool DotDotThenName(const char* s) {
  return runtime::DotDotThenName(g_prefilter.spellings, kSpellings, s);
}

// The entry of an absolute, clean path under the mount point (no ".", "..", "//" or
// trailing '/'), by one probe; false for anything else (the hook resolves it).
FANSTORE_HOT_TEXT bool FastEntry(const char* p, bool follow, uint32_t* out) {
  const size_t total = WordStrlen(p);
  unsigned n = 0;
  for (const auto& spelling : g_prefilter.spellings) {  // (the first is always set)
    if (spelling.len > 0 && total >= spelling.len && total <= spelling.len + 4096 &&
        EqualBytes(p, spelling.path, spelling.len)) {
      // an alias's symlink itself, not followed, is the kernel's (the hook sends it there);
      // below an alias of an inner directory the rest is not a key of the table
      if ((spelling.link && total == spelling.len && !follow) || spelling.inside) return false;
      n = spelling.len;
      break;
    }
  }
  if (n == 0) return false;
  size_t i = n;
  if (n > 1) {
    if (total == n) {
      *out = 0;
      return true;
    }
    if (p[n] != '/') return false;
    ++i;
  }
  return FastKeyEntry(g_prefilter.image, p + i, total - i, follow, out);
}

// The entry of virtual fd `fd`, if it is one.
FANSTORE_HOT_TEXT bool FdEntry(long fd_arg, uint32_t* out) {
  const int fd = static_cast<int>(fd_arg);
  if (fd < 0 || fd >= kMaxFds) return false;
  const int d = g_prefilter.fd_map[fd].load(std::memory_order_acquire);
  if (d < 0) return false;
  *out = g_prefilter.descs[d].entry;
  return true;
}

int Wants(long nr, const long a[6]) noexcept;

}  // namespace

FANSTORE_HOT_TEXT void FillStatOf(uint32_t idx, struct stat* st) noexcept {
  const meta::ImageEntry& e = g_prefilter.image.entries[idx];
  st->st_dev = kDev;
  st->st_ino = idx + 1;
  st->st_nlink = meta::LinkCount(e);
  st->st_mode = e.mode;
  st->st_uid = e.uid;
  st->st_gid = e.gid;
  st->__pad0 = 0;
  st->st_rdev = 0;
  st->st_size = static_cast<off_t>(e.size);
  st->st_blksize = 4096;
  // As ext4 reports them: whole 4 KiB blocks; short ("fast") symlinks take none.
  st->st_blocks = S_ISLNK(e.mode) ? 0 : static_cast<blkcnt_t>((e.size + 4095) / 4096 * 8);
  const time_t sec = static_cast<time_t>(e.mtime_ns / 1000000000);
  const long nsec = static_cast<long>(e.mtime_ns % 1000000000);
  st->st_atim.tv_sec = st->st_mtim.tv_sec = st->st_ctim.tv_sec = sec;
  st->st_atim.tv_nsec = st->st_mtim.tv_nsec = st->st_ctim.tv_nsec = nsec;
  st->__glibc_reserved[0] = st->__glibc_reserved[1] = st->__glibc_reserved[2] = 0;
}

FANSTORE_HOT_TEXT void FillStatxOf(uint32_t idx, void* buf) noexcept {
  // The kernel's struct statx layout (linux/stat.h), 256 bytes.
  const meta::ImageEntry& e = g_prefilter.image.entries[idx];
  auto* q = static_cast<uint64_t*>(buf);
  for (int i = 0; i < 32; ++i) q[i] = 0;
  auto* b = static_cast<uint8_t*>(buf);
  auto put32 = [&](int off, uint32_t v) { *reinterpret_cast<uint32_t*>(b + off) = v; };
  auto put64 = [&](int off, uint64_t v) { *reinterpret_cast<uint64_t*>(b + off) = v; };
  put32(0, 0x7ff);  // STATX_BASIC_STATS
  put32(4, 4096);
  put32(16, meta::LinkCount(e));
  put32(20, e.uid);
  put32(24, e.gid);
  *reinterpret_cast<uint16_t*>(b + 28) = static_cast<uint16_t>(e.mode);
  put64(32, idx + 1);
  put64(40, e.size);
  put64(48, S_ISLNK(e.mode) ? 0 : (e.size + 4095) / 4096 * 8);
  for (int t : {64, 96, 112}) {  // atime, ctime, mtime (not btime)
    put64(t, static_cast<uint64_t>(e.mtime_ns / 1000000000));
    put32(t + 8, static_cast<uint32_t>(e.mtime_ns % 1000000000));
  }
  put32(140, static_cast<uint32_t>(kDev));  // stx_dev_minor
}

namespace {
// Whether the parent of absolute path s is in PrefilterState::native_parents (the second
// stage puts it there: prefilter_again.cc ParentInSkeleton).
FANSTORE_HOT_TEXT bool KnownNativeParent(const char* s) {
  size_t n;
  LastComponent c;
  uint64_t key;
  return ParentSpan(s, &n, &c) &&
         NativeParentSlot(s, n, &key).load(std::memory_order_relaxed) == key;
}

FANSTORE_HOT_TEXT intercept::PrefilterResult Answered() {
  g_prefilter.answered_stats.Add();
  return {0, intercept::kAnswered};
}
}  // namespace

FANSTORE_HOT_TEXT intercept::PrefilterResult RuntimePrefilter(long nr, const long a[6]) noexcept {
  using intercept::kAnswered;
  using intercept::kToHook;
  using intercept::kToKernel;
  if (!g_prefilter.active) return {0, kToKernel};
  uint32_t e;
  switch (nr) {
    case SYS_stat:
    case SYS_lstat: {
      const char* p = reinterpret_cast<const char*>(a[0]);
      if (p && p[0] == '/' && FastEntry(p, nr == SYS_stat, &e)) {
        FillStatOf(e, reinterpret_cast<struct stat*>(a[1]));
        return Answered();
      }
      break;
    }
    case SYS_newfstatat: {
      const char* p = reinterpret_cast<const char*>(a[1]);
      if (!p) break;
      if (p[0] == 0 && (a[3] & AT_EMPTY_PATH) && FdEntry(a[0], &e)) {
        FillStatOf(e, reinterpret_cast<struct stat*>(a[2]));
        return Answered();
      }
      if (p[0] == '/' && FastEntry(p, !(a[3] & AT_SYMLINK_NOFOLLOW), &e)) {
        FillStatOf(e, reinterpret_cast<struct stat*>(a[2]));
        return Answered();
      }
      break;
    }
    case SYS_fstat:
      if (FdEntry(a[0], &e)) {
        FillStatOf(e, reinterpret_cast<struct stat*>(a[1]));
        return Answered();
      }
      break;
    case SYS_statx: {
      const char* p = reinterpret_cast<const char*>(a[1]);
      if (p && p[0] == '/' && FastEntry(p, !(a[2] & AT_SYMLINK_NOFOLLOW), &e)) {
        FillStatxOf(e, reinterpret_cast<void*>(a[4]));
        return Answered();
      }
      break;
    }
    default:
      break;
  }
  // The native-directory bits follow the fds they describe (runtime/prefilter_state.h).
  switch (nr) {
    case SYS_close:
      SetNativeDir(a[0], false);
      if (!VirtualFd(a[0])) NoteFdFreed(a[0]);  // (virtual or parked: OnClose)
      break;
    case SYS_dup2:
    case SYS_dup3:
      SetNativeDir(a[1], false);
      break;
    case SYS_close_range:
      for (unsigned long fd = static_cast<unsigned long>(a[0]);
           fd <= static_cast<unsigned long>(a[1]) && fd < static_cast<unsigned long>(kMaxFds); ++fd)
        SetNativeDir(static_cast<long>(fd), false);
      break;
    case SYS_dup:
    case SYS_fcntl:
      if (NativeDir(a[0]) && (nr == SYS_dup || a[1] == F_DUPFD || a[1] == F_DUPFD_CLOEXEC)) {
        const long k = base::RawSyscall6(nr, a[0], a[1], a[2]);
        if (k >= 0 && !intercept::t_clone_child) SetNativeDir(k, true);
        return {k, kAnswered};
      }
      break;
    default:
      break;
  }
  if (Wants(nr, a)) return {0, kToHook};
  // A call runtime/skeleton.h covers is made here, so that an answer from the mount point's
  // skeleton (a path through a symlink the runtime does not know) goes to the hook.
  const int at = SkeletonPathArg(nr);
  if (g_prefilter.skeleton_dev == 0 || at < 0) return {0, kToKernel};
  const char* path = reinterpret_cast<const char*>(a[at]);
  if (UnderLearned(path)) return {0, kToHook};
  if (KernelsAlone(nr, at, a)) return {0, kToKernel};
  // A stat whose absolute parent was found native before: the second stage would let the
  // kernel's answer stand whatever it is (a stat needs no permission on its last
  // component), so the stub makes the call, with fewer pages to fetch after it.
  if ((nr == SYS_stat || nr == SYS_lstat || nr == SYS_newfstatat || nr == SYS_statx) && path &&
      path[0] == '/' && KnownNativeParent(path))
    return {0, kToKernel};
  const long k = base::RawSyscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
  // ENOENT below a skeleton directory; EACCES for a name created in one, or for one opened
  // (they are 0111): the second stage looks (it needs a path buffer), unless the parent of
  // an absolute path's ENOENT is one it found native before (PATH lookups and Python's
  // imports miss in the same few directories).
  if (k == -ENOENT && path && path[0] == '/' && KnownNativeParent(path)) return {k, kAnswered};
  if (k == -ENOENT || k == -EACCES) return {k, intercept::kAgain};
  if (k >= 0 && OpensDirectory(nr, a)) {
    // Only a process that may read the skeleton can have opened one of its directories, and
    // not one below a native directory known not to be one (`find` and `du` open every
    // directory so): no system call then.
    const bool may_be_skeleton =
        (g_prefilter.skeleton_readable || !g_prefilter.skeleton_marked) && !ChildOfNativeDir(nr, a);
    if (may_be_skeleton) return {k, intercept::kAgain};
    SetNativeDir(k, !intercept::t_clone_child);
    return {k, kAnswered};
  }
  if (k >= 0 && (nr == SYS_open || nr == SYS_openat)) SetNativeDir(k, false);
  return {k, kAnswered};
}

namespace {

FANSTORE_HOT_TEXT int Wants(long nr, const long a[6]) noexcept {
  if (ActsOnFirstFd(nr))
    return VirtualFd(a[0]) ||
           (nr == SYS_ioctl && a[1] == static_cast<long>(FICLONE) && VirtualFd(a[2])) ||
           (nr == SYS_ioctl && a[1] == static_cast<long>(FICLONERANGE));
  switch (nr) {
    case SYS_close:
    case SYS_fcntl:
      return VirtualFd(a[0]) || Reserved(a[0]);
    case SYS_dup2:
    case SYS_dup3:
      return VirtualFd(a[0]) || VirtualFd(a[1]) || Reserved(a[0]) || Reserved(a[1]);
    case SYS_mmap:
      return !(a[3] & 0x20 /* MAP_ANONYMOUS */) && VirtualFd(a[4]);
    case SYS_sendfile:
      return VirtualFd(a[0]) || VirtualFd(a[1]);
    case SYS_copy_file_range:
    case SYS_splice:
      return VirtualFd(a[0]) || VirtualFd(a[2]);
    // The application's arrays are not read here (a bad pointer must give EFAULT, not a
    // crash): with any virtual fd open, the hook copies them in safely.
    case SYS_poll:
    case SYS_ppoll:
    case SYS_select:
    case SYS_pselect6:
      return g_prefilter.fd_count->load(std::memory_order_relaxed) > 0;
    case SYS_epoll_ctl:
      return VirtualFd(a[0]) || VirtualFd(a[2]);
    case SYS_close_range:
    case SYS_chdir:
    case SYS_fchdir:
    case SYS_exit_group:
      return 1;
    case SYS_getcwd:  // (2: a native cwd beside the mount point, the kernel's to name)
      return g_prefilter.cwd_virtual.load(std::memory_order_relaxed) == 1;
    // path calls: (dirfd, path) positions
    case SYS_readlink:
      return MaybeOurs(AT_FDCWD, a[0]) || IsProc(a[0]);
    case SYS_readlinkat:
      return MaybeOurs(a[0], a[1]) || IsProc(a[1]);
    case SYS_open:
    case SYS_creat:
    case SYS_stat:
    case SYS_lstat:
    case SYS_access:
    case SYS_statfs:
    case SYS_getxattr:
    case SYS_lgetxattr:
    case SYS_listxattr:
    case SYS_llistxattr:
    case SYS_setxattr:
    case SYS_lsetxattr:
    case SYS_removexattr:
    case SYS_lremovexattr:
    case SYS_unlink:
    case SYS_rmdir:
    case SYS_mkdir:
    case SYS_mknod:
    case SYS_truncate:
    case SYS_chmod:
    case SYS_chown:
    case SYS_lchown:
    case SYS_utime:
    case SYS_utimes:
      return MaybeOurs(AT_FDCWD, a[0]);
    case SYS_rename:
    case SYS_link:
      return MaybeOurs(AT_FDCWD, a[0]) || MaybeOurs(AT_FDCWD, a[1]);
    case SYS_symlink:
      return MaybeOurs(AT_FDCWD, a[1]);
    case SYS_openat:
    case SYS_openat2:
    case SYS_newfstatat:
    case SYS_statx:
    case SYS_faccessat:
    case SYS_faccessat2:
    case SYS_unlinkat:
    case SYS_mkdirat:
    case SYS_mknodat:
    case SYS_fchmodat:
    case SYS_fchownat:
    case SYS_utimensat:
    case SYS_futimesat:
      return MaybeOurs(a[0], a[1]) ||
             (a[1] && *reinterpret_cast<const char*>(a[1]) == 0 && VirtualFd(a[0])) ||
             (nr == SYS_utimensat && !a[1] && VirtualFd(a[0]));  // futimens
    case SYS_renameat:
    case SYS_renameat2:
    case SYS_linkat:
      return MaybeOurs(a[0], a[1]) || MaybeOurs(a[2], a[3]);
    case SYS_symlinkat:
      return MaybeOurs(a[1], a[2]);
    // runtime/unserved_calls.h: refused on dataset paths
    case 134:  // uselib
    case SYS_chroot:
    case SYS_acct:
    case SYS_umount2:
    case SYS_swapon:
    case SYS_swapoff:
      return MaybeOurs(AT_FDCWD, a[0]);
    case SYS_pivot_root:
      return MaybeOurs(AT_FDCWD, a[0]) || MaybeOurs(AT_FDCWD, a[1]);
    case SYS_mount:
    case SYS_quotactl:
    case SYS_inotify_add_watch:
      return MaybeOurs(AT_FDCWD, a[1]);
    case SYS_fanotify_mark:
      return MaybeOurs(a[3], a[4]) || VirtualFd(a[3]);
    case kNrMoveMount:
      return MaybeOurs(a[0], a[1]) || MaybeOurs(a[2], a[3]) || VirtualFd(a[0]) || VirtualFd(a[2]);
    case SYS_name_to_handle_at:
    case kNrOpenTree:
    case kNrFspick:
    case kNrMountSetattr:
    case kNrFchmodat2:
    case kNrSetxattrat:
    case kNrGetxattrat:
    case kNrListxattrat:
    case kNrRemovexattrat:
    case kNrOpenTreeAttr:
    case kNrFileGetattr:
    case kNrFileSetattr:
      return MaybeOurs(a[0], a[1]) || VirtualFd(a[0]);
    default:
      return 0;
  }
}

}  // namespace
}  // namespace fanstore::runtime
