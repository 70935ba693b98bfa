// The runtime's prefilter: decides, before any vector register is saved, whether a call
// can concern the dataset (the interest set: prefilter_wants.h; the fd and path predicates:
// prefilter_paths.h), and answers the stat family itself when a path is found by one probe
// of the image. Compiled with -mgeneral-regs-only -fno-tree-loop-distribute-patterns (no
// vector code, no loops turned into memset/memcpy calls) and calls nothing outside its
// translation unit: the two headers are part of it, included here only, so that every
// predicate is inlined into the one function each intercepted call runs.
#define FANSTORE_PREFILTER_TU
#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>

#include "base/raw_syscall.h"
#include "base/syscall_numbers.h"
#include "intercept/clone_mark.h"
#include "meta/format.h"
#include "meta/path_hash.h"
#include "runtime/calls/prefilter_paths.h"
#include "runtime/calls/prefilter_wants.h"
#include "runtime/names/kernel_names.h"
#include "runtime/names/word_scan.h"
#include "runtime/paths/skeleton.h"
#include "runtime/process/fd_table.h"
#include "runtime/process/prefilter_state.h"

namespace fanstore::runtime {

alignas(4096) PrefilterState g_prefilter;

constexpr long kDev = 0xFA57;

FANSTORE_HOT_TEXT void FillStatOf(uint32_t idx, struct stat* st) noexcept {
  const meta::ImageEntry& e = g_prefilter.image.entries[idx];
  st->st_dev = kDev;
  st->st_ino = idx + 1;
  st->st_nlink = meta::LinkCount(e);
  st->st_mode = e.mode;
  st->st_uid = e.uid;
  st->st_gid = e.gid;
  st->st_rdev = 0;
  st->st_size = static_cast<off_t>(e.size);
  st->st_blksize = 4096;
  // As ext4 reports them: whole 4 KiB blocks; short ("fast") symlinks take none.
  st->st_blocks = S_ISLNK(e.mode) ? 0 : static_cast<blkcnt_t>((e.size + 4095) / 4096 * 8);
  const time_t sec = static_cast<time_t>(e.mtime_ns / 1000000000);
  const long nsec = static_cast<long>(e.mtime_ns % 1000000000);
  st->st_atim.tv_sec = st->st_mtim.tv_sec = st->st_ctim.tv_sec = sec;
  st->st_atim.tv_nsec = st->st_mtim.tv_nsec = st->st_ctim.tv_nsec = nsec;
  // The padding the kernel writes too (the layouts differ: x86-64's own, aarch64's generic).
#if defined(__x86_64__)
  st->__pad0 = 0;
  st->__glibc_reserved[0] = st->__glibc_reserved[1] = st->__glibc_reserved[2] = 0;
#else
  st->__pad1 = 0;
  st->__pad2 = 0;
  st->__glibc_reserved[0] = st->__glibc_reserved[1] = 0;
#endif
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
// Whether directory fd k is surely none of the skeleton's: another device, or no mark (one
// fstat, on the caller's stack). When it may be one, the second stage asks the kernel where
// it is (prefilter_again.cc UnderMountPoint), with a path buffer this stage's frame has no
// room for; the device and mark are not asked again.
FANSTORE_HOT_TEXT bool SurelyNotSkeleton(long k) {
  struct stat st;
  return base::RawSyscall6(SYS_fstat, k, reinterpret_cast<long>(&st)) == 0 &&
         !IsSkeletonDir(st, g_prefilter.skeleton_dev, g_prefilter.skeleton_marked);
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
      if (p && PlainNativeStat(AT_FDCWD, p)) return {0, kToKernel};
      if (p && p[0] == '/' && FastEntry(p, nr == SYS_stat, &e)) {
        FillStatOf(e, reinterpret_cast<struct stat*>(a[1]));
        return Answered();
      }
      break;
    }
    case SYS_newfstatat: {
      const char* p = reinterpret_cast<const char*>(a[1]);
      if (!p) break;
      if (PlainNativeStat(a[0], p)) return {0, kToKernel};
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
      if (p && PlainNativeStat(a[0], p)) return {0, kToKernel};
      if (p && p[0] == '/' && FastEntry(p, !(a[2] & AT_SYMLINK_NOFOLLOW), &e)) {
        FillStatxOf(e, reinterpret_cast<void*>(a[4]));
        return Answered();
      }
      break;
    }
    default:
      break;
  }
  // The native-directory bits follow the fds they describe (runtime/process/prefilter_state.h).
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
  // find's and du's openat(dirfd, name, O_NOFOLLOW) below a directory checked before: the
  // kernel's answer stands whatever it is (ENOENT and EACCES are that directory's, and a
  // directory opened is none of the skeleton's), so it is made here at once, to mark the
  // fd. Classify and the rules below would decide the same, after two more scans of the name.
  if (nr == SYS_openat && (a[2] & O_NOFOLLOW) && g_prefilter.skeleton_dev != 0 && a[1] &&
      NameBelowNativeDir(a[0], reinterpret_cast<const char*>(a[1]))) {
    const long k = base::RawSyscall6(nr, a[0], a[1], a[2], a[3]);
    if (k >= 0) SetNativeDir(k, OpensDirectory(nr, a) && !intercept::t_clone_child);
    return {k, kAnswered};
  }
  const int at = Classify(nr, a);
  if (at == kWanted) return {0, kToHook};
  // A call runtime/paths/skeleton.h covers is made here, so that an answer from the mount point's
  // skeleton (a path through a symlink the runtime does not know) goes to the hook.
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
    if (may_be_skeleton && !SurelyNotSkeleton(k)) return {k, intercept::kAgain};
    SetNativeDir(k, !intercept::t_clone_child);
    return {k, kAnswered};
  }
  if (k >= 0 && (nr == SYS_open || nr == SYS_openat)) SetNativeDir(k, false);
  return {k, kAnswered};
}

}  // namespace fanstore::runtime
