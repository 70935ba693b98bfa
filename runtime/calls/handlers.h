// The system-call handlers of the runtime: each takes the six raw arguments and returns a
// HookResult (a kernel-style value, or pass to the kernel for anything outside the
// dataset). handlers_open.cc has the opens, handlers_path.cc the other path-taking calls,
// handlers_mutation.cc those that would change a path, handlers_fd.cc the fd calls (reads, offsets,
// dup, fcntl, directory reads, copies), handlers_mmap.cc mmap and handlers_poll.cc readiness.
// Thread-safety: every handler is safe from any thread; the hook (hook.cc) never calls
// them in a vfork child except the few that only pass through.
#pragma once

#include <sys/stat.h>

#include "intercept/hook_api.h"
#include "meta/namespace_image.h"
#include "runtime/calls/args.h"
#include "runtime/paths/resolve.h"

namespace fanstore::runtime {

using intercept::Handled;
using intercept::HookResult;
using intercept::kPassToKernel;

// Shared helpers.
// The handled answer -e.
inline HookResult Err(int e) {
  return Handled(-e);
}
// A raw path argument.
inline const char* Str(long p) {
  return reinterpret_cast<const char*>(p);
}
// The parent directory of `path` as seen from dirfd, for calls that create a name.
Resolved ResolveParent(long dirfd, const char* path);
void FillStat(uint32_t entry, struct stat* st);
bool IsDirEntry(uint32_t entry);
bool IsSymlink(uint32_t entry);
// A new virtual fd (a placeholder kernel fd) for `entry` opened with `flags`, or -errno.
long OpenVirtual(uint32_t entry, int flags);
// Replaces virtual fd `fd` in place by a sealed memfd holding the member's bytes (for
// mmap of compressed members); returns 0 or -errno.
long UpgradeToMemfd(long fd);
long MemfdOf(uint32_t entry, bool cloexec);
// The application's memory at `src`, copied as the kernel would: false (EFAULT) for a bad
// pointer, where a plain access would crash.
bool CopyIn(void* dst, long src, size_t len);
// Runs a syscall with a path argument replaced (for kRewritten resolutions).
long WithPath(long nr, const long a[6], int path_arg, const char* path);

// Path calls (handlers_open.cc: opens; handlers_path.cc: the rest).
HookResult OnOpenat(long nr, const long a[6]);
HookResult OnStatPath(long nr, const long a[6]);
HookResult OnStatx(const long a[6]);
HookResult OnAccess(long nr, const long a[6]);
HookResult OnReadlink(long nr, const long a[6]);
HookResult OnChdir(long nr, const long a[6]);
HookResult OnGetcwd(const long a[6]);
HookResult OnStatfs(long nr, const long a[6]);
HookResult OnXattrPath(long nr, const long a[6]);
HookResult OnMutationPath(long nr, const long a[6]);
HookResult OnUtimensat(long nr, const long a[6]);
HookResult OnExec(long nr, const long a[6]);
// runtime/names/unserved_calls.h
HookResult OnUnserved(long nr, const long a[6]);

// Fd calls.
HookResult OnRead(long nr, const long a[6]);
HookResult OnLseek(const long a[6]);
HookResult OnClose(const long a[6]);
HookResult OnCloseRange(const long a[6]);
HookResult OnDup(long nr, const long a[6]);
HookResult OnFcntl(const long a[6]);
HookResult OnIoctl(const long a[6]);
HookResult OnGetdents(const long a[6]);
HookResult OnFstat(const long a[6]);
HookResult OnMmap(const long a[6]);
HookResult OnCopy(long nr, const long a[6]);
HookResult OnFdMisc(long nr, const long a[6]);
HookResult OnPoll(long nr, const long a[6]);
HookResult OnSelect(long nr, const long a[6]);
HookResult OnEpollCtl(const long a[6]);

}  // namespace fanstore::runtime
