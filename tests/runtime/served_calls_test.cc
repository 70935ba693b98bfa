// The served calls (runtime/calls/served_calls.h, which the hook routes) and the prefilter
// (runtime/calls/prefilter_wants.h Classify, which decides what reaches the hook) are written
// apart: every served or refused call, given a dataset path or a virtual fd where it takes one,
// must not go straight to the kernel, and given a native path or fd, it must. The table below says
// where each call takes its path or fd; a call added to served_calls.h without a row here
// fails until it has one.
#include "runtime/calls/served_calls.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <map>
#include <set>
#include <string>

#include "base/syscall_numbers.h"
#include "runtime/calls/args.h"
#include "runtime/names/unserved_calls.h"
#include "runtime/paths/resolve.h"
#include "runtime/paths/skeleton.h"
#include "runtime/process/fd_table.h"
#include "runtime/process/prefilter_state.h"
#include "runtime/process/state.h"
#include "tests/runtime/attached_image.h"

namespace fanstore::runtime {
namespace {

// How a call names what it acts on.
enum class Takes {
  kPath0,     // a path in a[0]
  kPath1,     // a path in a[1] (symlink's link name)
  kTwoPaths,  // paths in a[0] and a[1] (rename, link): ours in one, the other native
  kExec,      // execve, execveat: the entry sends every exec to the hook (its policy on
              // LD_PRELOAD and the environment), before this prefilter

  kAtPath1,     // a dirfd in a[0], a path in a[1]
  kAtPath2,     // a dirfd in a[1], a path in a[2] (symlinkat's link name)
  kFd0,         // an fd in a[0]
  kFd4,         // an fd in a[4] (mmap, with a[3] MAP_SHARED)
  kFd2,         // an fd in a[2] (epoll_ctl's target)
  kAnyVirtual,  // its fds are in the application's arrays: the hook while any fd is virtual
  kAlways,      // always the hook's (exit_group, chdir, close_range)
  kVirtualCwd,  // the hook's while the cwd is in the dataset (getcwd)
};

const std::map<long, Takes>& Table() {
  static const std::map<long, Takes> t = [] {
    std::map<long, Takes> m;
    for (long nr : {SYS_open,       SYS_creat,    SYS_stat,      SYS_lstat,       SYS_access,
                    SYS_readlink,   SYS_statfs,   SYS_getxattr,  SYS_lgetxattr,   SYS_listxattr,
                    SYS_llistxattr, SYS_setxattr, SYS_lsetxattr, SYS_removexattr, SYS_lremovexattr,
                    SYS_unlink,     SYS_rmdir,    SYS_mkdir,     SYS_mknod,       SYS_truncate,
                    SYS_chmod,      SYS_chown,    SYS_lchown,    SYS_utime,       SYS_utimes})
      m[nr] = Takes::kPath0;
    m[SYS_symlink] = Takes::kPath1;
    m[SYS_rename] = m[SYS_link] = Takes::kTwoPaths;
    m[SYS_execve] = m[SYS_execveat] = Takes::kExec;
    m[SYS_symlinkat] = Takes::kAtPath2;
    for (long nr :
         {SYS_openat, SYS_openat2, SYS_newfstatat, SYS_statx, SYS_faccessat, SYS_faccessat2,
          SYS_readlinkat, SYS_unlinkat, SYS_mkdirat, SYS_mknodat, SYS_renameat, SYS_renameat2,
          SYS_linkat, SYS_fchmodat, SYS_fchownat, SYS_utimensat, SYS_futimesat})
      m[nr] = Takes::kAtPath1;
    for (long nr : {SYS_fstat,           SYS_fstatfs,   SYS_read,       SYS_pread64,
                    SYS_readv,           SYS_preadv,    SYS_preadv2,    SYS_lseek,
                    SYS_close,           SYS_dup,       SYS_dup2,       SYS_dup3,
                    SYS_fcntl,           SYS_ioctl,     SYS_getdents64, SYS_fadvise64,
                    SYS_readahead,       SYS_fsync,     SYS_fdatasync,  SYS_syncfs,
                    SYS_sync_file_range, SYS_flock,     SYS_ftruncate,  SYS_fchmod,
                    SYS_fchown,          SYS_fgetxattr, SYS_flistxattr, SYS_fsetxattr,
                    SYS_fremovexattr,    SYS_write,     SYS_pwrite64,   SYS_writev,
                    SYS_pwritev,         SYS_pwritev2,  SYS_sendfile,   SYS_copy_file_range,
                    SYS_splice})
      m[nr] = Takes::kFd0;
    m[SYS_mmap] = Takes::kFd4;
    m[SYS_epoll_ctl] = Takes::kFd2;
    for (long nr : {SYS_poll, SYS_ppoll, SYS_select, SYS_pselect6}) m[nr] = Takes::kAnyVirtual;
    for (long nr : {SYS_exit_group, SYS_chdir, SYS_fchdir, SYS_close_range}) m[nr] = Takes::kAlways;
    m[SYS_getcwd] = Takes::kVirtualCwd;
    // (A negative number: a call this architecture does not have, base/syscall_numbers.h.)
    for (auto it = m.begin(); it != m.end();) it = it->first < 0 ? m.erase(it) : std::next(it);
    return m;
  }();
  return t;
}

class ServedCallsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_NE(AttachedImage::Get(), nullptr);
    ASSERT_TRUE(g_prefilter.active);
    const int d = Fds().NewDesc(Get()->ns.Lookup("m/text.txt"), O_RDONLY);
    ASSERT_GE(d, 0);
    Fds().Bind(kVirtual, d);
  }
  static constexpr int kVirtual = 300, kNative = 301;

  // The prefilter's decision for call nr with the argument `ours` decides on: the dataset's
  // (a path under the mount point, the virtual fd) or a native one.
  static long Decide(long nr, Takes how, bool ours) {
    const std::string mnt = AttachedImage::kMount;
    static std::string path;
    path = ours ? mnt + "/m/text.txt" : std::string("/etc/hostname");
    const long p = reinterpret_cast<long>(path.c_str());
    const long fd = ours ? kVirtual : kNative;
    alignas(64) static char buf[4096];  // where an answered stat writes
    const long b = reinterpret_cast<long>(buf);
    long a[6] = {0, 0, 0, 0, 0, 0};
    switch (how) {
      case Takes::kPath0:
        a[0] = p;
        a[1] = b;
        break;
      case Takes::kPath1:
        a[0] = reinterpret_cast<long>("target");
        a[1] = p;
        break;
      case Takes::kTwoPaths:
        a[0] = p;
        a[1] = reinterpret_cast<long>("/etc/no-such-name");
        break;
      case Takes::kAtPath1:
        a[0] = AT_FDCWD;
        a[1] = p;
        a[2] = nr == SYS_newfstatat ? b : 0;
        a[4] = nr == SYS_statx ? b : 0;
        break;
      case Takes::kAtPath2:
        a[0] = reinterpret_cast<long>("target");
        a[1] = AT_FDCWD;
        a[2] = p;
        break;
      case Takes::kFd0:
        a[0] = fd;
        a[1] = nr == SYS_fcntl ? F_GETFL : nr == SYS_dup2 || nr == SYS_dup3 ? kNative + 1 : b;
        break;
      case Takes::kFd4:
        a[1] = 4096;
        a[3] = MAP_SHARED;
        a[4] = fd;
        break;
      case Takes::kFd2:
        a[0] = kNative + 2;
        a[2] = fd;
        break;
      default:
        break;
    }
    return RuntimePrefilter(nr, a).action;
  }
};

TEST_F(ServedCallsTest, EveryServedOrRefusedCallHasARow) {
  std::set<long> missing;
#define FANSTORE_SERVED_TEST_ROW(nr, handler, rule, fds, paths, flags) \
  if (nr >= 0 && !Table().count(nr)) missing.insert(nr);
  FANSTORE_SERVED_CALLS(FANSTORE_SERVED_TEST_ROW)
#undef FANSTORE_SERVED_TEST_ROW
  EXPECT_TRUE(missing.empty()) << "served calls without a row here: "
                               << ::testing::PrintToString(missing);
  // and no row for a call that is not served
  const intercept::Interest served = ServedInterest();
  for (const auto& [nr, how] : Table()) EXPECT_TRUE(served.nrs.test(static_cast<size_t>(nr))) << nr;
}

TEST_F(ServedCallsTest, DatasetArgumentsReachTheRuntimeAndNativeOnesTheKernel) {
  for (const auto& [nr, how] : Table()) {
    SCOPED_TRACE("system call " + std::to_string(nr));
    if (how == Takes::kExec) continue;
    if (how == Takes::kVirtualCwd) {
      SetCwdNative();                   // unknown until a relative path is resolved:
      Resolve(AT_FDCWD, "no-such", 0);  // the test's own, native
      EXPECT_EQ(Decide(nr, how, false), intercept::kToKernel);
      SetCwdVirtual(0);
      EXPECT_NE(Decide(nr, how, true), intercept::kToKernel);
      SetCwdNative();
      continue;
    }
    EXPECT_NE(Decide(nr, how, true), intercept::kToKernel);
    if (how != Takes::kAnyVirtual && how != Takes::kAlways) {
      EXPECT_EQ(Decide(nr, how, false), intercept::kToKernel);
    }
  }
}

// The skeleton's path argument and the mutation calls' first path come from the same rows.
TEST(CallTable, RowsSayWhereTheSkeletonAndMutationPathsAre) {
#if !defined(FANSTORE_GENERIC_SYSCALLS)
  EXPECT_EQ(SkeletonPathArg(SYS_open), 0);
  EXPECT_EQ(SkeletonPathArg(SYS_readlink), 0);
#endif
  EXPECT_EQ(SkeletonPathArg(SYS_openat), 1);
  EXPECT_EQ(SkeletonPathArg(SYS_statx), 1);
  EXPECT_EQ(SkeletonPathArg(SYS_openat2), -1);  // resolves with its own rules (RESOLVE_*)
  EXPECT_EQ(SkeletonPathArg(SYS_read), -1);
  EXPECT_EQ(SkeletonPathArg(-1), -1);
  EXPECT_EQ(SkeletonPathArg(100000), -1);
  EXPECT_EQ(RowOf(SYS_symlinkat).paths.dirfd[0], 1);  // symlinkat(target, dirfd, linkpath)
  EXPECT_EQ(RowOf(SYS_symlinkat).paths.path[0], 2);
  EXPECT_EQ(RowOf(SYS_renameat2).paths.dirfd[1], 2);
  EXPECT_EQ(RowOf(SYS_renameat2).paths.path[1], 3);
  EXPECT_EQ(RowOf(SYS_fchownat).flags_arg, 4);
  EXPECT_EQ(RowOf(SYS_utimensat).flags_arg, 3);
  EXPECT_TRUE(RowOf(SYS_mkdirat).flags & kCreates);
  EXPECT_TRUE(RowOf(SYS_unlinkat).flags & kRemoves);
  EXPECT_FALSE(RowOf(SYS_linkat).flags & kRemoves);
  EXPECT_FALSE(RowOf(SYS_getpid).flags & kListed);
  for (const UnservedCall& c : kUnservedCalls) {
    if (c.nr < 0) continue;
    EXPECT_TRUE(RowOf(c.nr).flags & kUnserved) << c.name;
  }
}

// The handlers' accessors read each call's row: the fd, the (dirfd, path) pairs and the
// arguments after a path are where the kernel takes them.
TEST(CallArgs, AccessorsFindTheArgumentsTheRowsName) {
  const long a[6] = {10, 11, 12, 13, 14, 15};
  auto str = [](long v) { return reinterpret_cast<const char*>(v); };
  const Args fstatat(SYS_newfstatat, a);  // (dirfd, path, buf, flags)
  EXPECT_TRUE(fstatat.at());
  EXPECT_EQ(fstatat.dirfd(), 10);
  EXPECT_EQ(fstatat.path(), str(11));
  EXPECT_EQ(fstatat.after_path(1), 12);
  EXPECT_EQ(fstatat.after_path(2), 13);
  const Args execveat(SYS_execveat, a);  // (dirfd, path, argv, envp, flags)
  EXPECT_EQ(execveat.path_arg(), 1);
  EXPECT_EQ(execveat.after_path(2), 13);
  EXPECT_EQ(execveat.after_path(3), 14);
  const Args statx(SYS_statx, a);  // (dirfd, path, flags, mask, buf)
  EXPECT_EQ(statx.after_path(3), 14);
  const Args renameat2(SYS_renameat2, a);  // (olddirfd, oldpath, newdirfd, newpath, flags)
  EXPECT_EQ(renameat2.dirfd(1), 12);
  EXPECT_EQ(renameat2.path(1), str(13));
  EXPECT_EQ(Args(SYS_mmap, a).fd(), 14);
  EXPECT_EQ(Args(SYS_dup3, a).fd(1), 11);
  EXPECT_EQ(Args(SYS_copy_file_range, a).fd(1), 12);
  EXPECT_EQ(Args(SYS_fchdir, a).fd(), 10);
  const Args read(SYS_read, a);
  EXPECT_EQ(read.fd(), 10);
  EXPECT_EQ(read.fd(1), -1);
  EXPECT_FALSE(read.at());
  EXPECT_EQ(read.path(), nullptr);
  EXPECT_EQ(read.dirfd(), AT_FDCWD);
#if !defined(FANSTORE_GENERIC_SYSCALLS)
  const Args stat(SYS_stat, a);  // (path, buf)
  EXPECT_FALSE(stat.at());
  EXPECT_EQ(stat.dirfd(), AT_FDCWD);
  EXPECT_EQ(stat.path(), str(10));
  EXPECT_EQ(stat.after_path(1), 11);
  const Args execve(SYS_execve, a);  // (path, argv, envp)
  EXPECT_EQ(execve.path(), str(10));
  EXPECT_EQ(execve.after_path(2), 12);
  EXPECT_EQ(Args(SYS_chdir, a).path(), str(10));
  EXPECT_EQ(Args(SYS_creat, a).path(), str(10));
#endif
}

TEST_F(ServedCallsTest, RefusedCallsOnDatasetPathsReachTheRuntime) {
  const std::string inside = std::string(AttachedImage::kMount) + "/m/text.txt";
  for (const UnservedCall& c : kUnservedCalls) {
    SCOPED_TRACE(c.name);
    for (int k = 0; k < 2 && c.path[k] >= 0; ++k) {
      long a[6] = {0, 0, 0, 0, 0, 0};
      for (int j = 0; j < 2; ++j) {
        if (c.dirfd[j] >= 0) a[c.dirfd[j]] = AT_FDCWD;
        if (c.path[j] >= 0) a[c.path[j]] = reinterpret_cast<long>("/etc/hostname");
      }
      a[c.path[k]] = reinterpret_cast<long>(inside.c_str());
      EXPECT_NE(RuntimePrefilter(c.nr, a).action, intercept::kToKernel) << "path " << k;
      a[c.path[k]] = reinterpret_cast<long>("/etc/hostname");
      EXPECT_EQ(RuntimePrefilter(c.nr, a).action, intercept::kToKernel) << "path " << k;
    }
  }
}

}  // namespace
}  // namespace fanstore::runtime
