// The runtime's hook: the one function the interception layer calls for every wanted
// system call, routing it to its handler. Also the library's start-up (PreloadHookSpec)
// and its statistics at exit (FANSTORE_STATS).
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "intercept/hook_api.h"
#include "intercept/preload_log.h"
#include "runtime/counter.h"
#include "runtime/fd_table.h"
#include "runtime/handlers.h"
#include "runtime/inherit.h"
#include "runtime/member_io.h"
#include "runtime/prefilter_state.h"
#include "runtime/state.h"

namespace fanstore::runtime {
intercept::HookResult RuntimeHook(long nr, const long a[6]) noexcept;
void WriteStats();
namespace {

ShardedCounter s_opens, s_stats, s_calls, s_failed;

HookResult Route(long nr, const long a[6]) {
  switch (nr) {
    case SYS_open:
    case SYS_openat:
      s_opens.Add(1);
      return OnOpenat(nr, a);
    case SYS_stat:
    case SYS_lstat:
    case SYS_newfstatat:
      s_stats.Add(1);
      return OnStatPath(nr, a);
    case SYS_statx:
      s_stats.Add(1);
      return OnStatx(a);
    case SYS_fstat:
      s_stats.Add(1);
      return OnFstat(a);
    case SYS_access:
    case SYS_faccessat:
    case SYS_faccessat2:
      return OnAccess(nr, a);
    case SYS_readlink:
    case SYS_readlinkat:
      return OnReadlink(nr, a);
    case SYS_chdir:
    case SYS_fchdir:
      return OnChdir(nr, a);
    case SYS_getcwd:
      return OnGetcwd(a);
    case SYS_execve:
    case SYS_execveat:
      return OnExec(nr, a);
    case SYS_statfs:
    case SYS_fstatfs:
      return OnStatfs(nr, a);
    case SYS_getxattr:
    case SYS_lgetxattr:
    case SYS_listxattr:
    case SYS_llistxattr:
    case SYS_setxattr:
    case SYS_lsetxattr:
    case SYS_removexattr:
    case SYS_lremovexattr:
      return OnXattrPath(nr, a);
    case SYS_read:
    case SYS_pread64:
    case SYS_readv:
    case SYS_preadv:
    case SYS_preadv2:
      return OnRead(nr, a);
    case SYS_lseek:
      return OnLseek(a);
    case SYS_close:
      return OnClose(a);
    case SYS_close_range:
      return OnCloseRange(a);
    case SYS_dup:
    case SYS_dup2:
    case SYS_dup3:
      return OnDup(nr, a);
    case SYS_fcntl:
      return OnFcntl(a);
    case SYS_ioctl:
      return OnIoctl(a);
    case SYS_getdents64:
      return OnGetdents(a);
    case SYS_mmap:
      return OnMmap(a);
    case SYS_sendfile:
    case SYS_copy_file_range:
    case SYS_splice:
      return OnCopy(nr, a);
    case SYS_poll:
    case SYS_ppoll:
      return OnPoll(nr, a);
    case SYS_select:
    case SYS_pselect6:
      return OnSelect(nr, a);
    case SYS_epoll_ctl:
      return OnEpollCtl(a);
    case SYS_fadvise64:
    case SYS_readahead:
    case SYS_fsync:
    case SYS_fdatasync:
    case SYS_ftruncate:
    case SYS_fchmod:
    case SYS_fchown:
    case SYS_fgetxattr:
    case SYS_flistxattr:
    case SYS_fsetxattr:
    case SYS_fremovexattr:
    case SYS_write:
    case SYS_pwrite64:
    case SYS_writev:
    case SYS_pwritev:
    case SYS_pwritev2:
      return OnFdMisc(nr, a);
    default:
      return OnMutationPath(nr, a);
  }
}

}  // namespace

intercept::HookResult RuntimeHook(long nr, const long a[6]) noexcept {
  State* s = Get();
  if (!s) return kPassToKernel;
  if (nr == SYS_exit_group) {  // every way out (exit, _exit, os._exit) ends here
    WriteStats();
    if (!s->InVforkChild()) Fds().ReleaseAll();
    return kPassToKernel;
  }
  // A vfork child shares its parent's memory: handlers that allocate, lock or change
  // shared tables check for it (State::InVforkChild, a getpid) themselves; the rest
  // (stat, lseek, fstat, access, readlink: no allocation) are safe as they are, and exec
  // takes care of itself.
  switch (nr) {
    case SYS_open:
    case SYS_openat:
    case SYS_read:
    case SYS_readv:
    case SYS_pread64:
    case SYS_preadv:
    case SYS_preadv2:
    case SYS_dup:
    case SYS_mmap:
    case SYS_sendfile:
    case SYS_copy_file_range:
    case SYS_splice:
    case SYS_chdir:
    case SYS_fchdir:
    case SYS_getdents64:
      if (s->InVforkChild()) return kPassToKernel;
      break;
    default:
      break;
  }
  s_calls.Add(1);
  const HookResult r = Route(nr, a);
  if (r.handled && r.value < 0) s_failed.Add(1);
  return r;
}

void WriteStats() {
  State* s = Get();
  if (!s || s->stats_target.empty() || s->InVforkChild()) return;
  const IoStats io = SnapshotIoStats();
  char line[512];
  std::snprintf(
      line, sizeof line,
      "{\"pid\": %d, \"calls\": %llu, \"opens\": %llu, \"stats\": %llu, \"reads\": %llu, "
      "\"bytes\": %llu, \"cache_hits\": %llu, \"inflates\": %llu, \"inflate_ms\": %.3f, "
      "\"error_replies\": %llu, \"damaged\": %llu, \"remote\": %llu, \"device_reads\": %llu, "
      "\"mapped_reads\": %llu}\n",
      static_cast<int>(::getpid()), static_cast<unsigned long long>(s_calls.Load()),
      static_cast<unsigned long long>(s_opens.Load()),
      static_cast<unsigned long long>(s_stats.Load() + g_prefilter.answered_stats.Load()),
      static_cast<unsigned long long>(io.reads), static_cast<unsigned long long>(io.bytes),
      static_cast<unsigned long long>(io.cache_hits), static_cast<unsigned long long>(io.inflates),
      io.inflate_ns / 1e6, static_cast<unsigned long long>(s_failed.Load()),
      static_cast<unsigned long long>(io.errors), static_cast<unsigned long long>(io.remote),
      static_cast<unsigned long long>(io.device_reads),
      static_cast<unsigned long long>(io.mapped_reads));
  if (s->stats_target == "1") {
    std::fputs(line, stderr);
  } else if (FILE* f = std::fopen(s->stats_target.c_str(), "a")) {
    std::fputs(line, f);
    std::fclose(f);
  }
}

}  // namespace fanstore::runtime

namespace fanstore::intercept {

HookSpec PreloadHookSpec() {
  using namespace fanstore::runtime;
  HookSpec spec;
  if (Status st = Init(); !st.ok()) {
    std::fprintf(stderr, "fanstore: runtime start-up failed: %s\n", st.message().c_str());
    _exit(121);
  }
  State* s = Get();
  if (!s) return spec;  // no dataset configured: nothing to serve
  Fds();
  AdoptInherited();
  g_prefilter.mount_len =
      static_cast<unsigned>(std::min<size_t>(s->mount.size(), sizeof g_prefilter.mount - 1));
  std::memcpy(g_prefilter.mount, s->mount.data(), g_prefilter.mount_len);
  g_prefilter.reserved_lo = s->reserved_lo;
  g_prefilter.fd_bits = Fds().bits();
  g_prefilter.fd_count = Fds().bound();
  g_prefilter.fd_map = Fds().fd_map();
  g_prefilter.descs = Fds().slab();
  g_prefilter.entries = s->ns.entries();
  g_prefilter.buckets = s->ns.buckets();
  g_prefilter.bucket_mask = s->ns.bucket_mask();
  g_prefilter.strings = s->ns.strings();
  g_prefilter.active = true;
  spec.hook = &RuntimeHook;
  spec.prefilter = &RuntimePrefilter;
  for (long nr :
       {SYS_open,       SYS_openat,          SYS_stat,        SYS_lstat,        SYS_newfstatat,
        SYS_statx,      SYS_fstat,           SYS_access,      SYS_faccessat,    SYS_faccessat2,
        SYS_readlink,   SYS_readlinkat,      SYS_chdir,       SYS_fchdir,       SYS_getcwd,
        SYS_statfs,     SYS_fstatfs,         SYS_getxattr,    SYS_lgetxattr,    SYS_listxattr,
        SYS_llistxattr, SYS_setxattr,        SYS_lsetxattr,   SYS_removexattr,  SYS_lremovexattr,
        SYS_read,       SYS_pread64,         SYS_readv,       SYS_preadv,       SYS_preadv2,
        SYS_lseek,      SYS_close,           SYS_close_range, SYS_dup,          SYS_dup2,
        SYS_dup3,       SYS_fcntl,           SYS_ioctl,       SYS_getdents64,   SYS_mmap,
        SYS_sendfile,   SYS_copy_file_range, SYS_splice,      SYS_fadvise64,    SYS_readahead,
        SYS_fsync,      SYS_fdatasync,       SYS_ftruncate,   SYS_fchmod,       SYS_fchown,
        SYS_fgetxattr,  SYS_flistxattr,      SYS_fsetxattr,   SYS_fremovexattr, SYS_write,
        SYS_pwrite64,   SYS_writev,          SYS_pwritev,     SYS_pwritev2,     SYS_unlink,
        SYS_unlinkat,   SYS_rmdir,           SYS_mkdir,       SYS_mkdirat,      SYS_mknod,
        SYS_mknodat,    SYS_rename,          SYS_renameat,    SYS_renameat2,    SYS_link,
        SYS_linkat,     SYS_symlink,         SYS_symlinkat,   SYS_chmod,        SYS_fchmodat,
        SYS_chown,      SYS_lchown,          SYS_fchownat,    SYS_truncate,     SYS_utime,
        SYS_utimes,     SYS_utimensat,       SYS_futimesat,   SYS_exit_group,   SYS_poll,
        SYS_ppoll,      SYS_select,          SYS_pselect6,    SYS_epoll_ctl})
    spec.interest.nrs.set(nr);
  return spec;
}

}  // namespace fanstore::intercept
