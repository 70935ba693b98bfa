// A test hook for the interception layer (not the product hook). FANSTORE_TESTHOOK selects:
//   rewrite (default)  open/openat/stat calls on "/fanstore-test/eio*" fail with EHOSTDOWN
//                      (an errno nothing else produces), and so does readlink of anything
//                      under "/fanstore-test" (realpath's walk); "/fanstore-test/null" opens
//                      /dev/null; getpid is counted and passed to the kernel.
//   pass               every patchable site is patched and every call passed (getpid counted)
//   handle-getpid      getpid is answered without the kernel (for the benchmark)
// FANSTORE_TESTHOOK_COUNT_FILE: at exit, append "<pid> <getpid calls seen>\n" to it.
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "intercept/hook_api.h"
#include "intercept/raw_syscall.h"

namespace fanstore::intercept {
namespace {

enum class Mode { kRewrite, kPass, kHandleGetpid };
Mode g_mode = Mode::kRewrite;
std::atomic<long> g_getpid{0};
long g_pid = 0;
const char* g_count_file = nullptr;

bool IsTestPath(long p, const char* prefix) {
  const char* s = reinterpret_cast<const char*>(p);
  return s && std::strncmp(s, prefix, std::strlen(prefix)) == 0;
}

HookResult OnPath(long path) {
  if (IsTestPath(path, "/fanstore-test/eio")) return Handled(-EHOSTDOWN);
  if (IsTestPath(path, "/fanstore-test/null"))
    return Handled(RawSyscall6(SYS_openat, AT_FDCWD, reinterpret_cast<long>("/dev/null"),
                               O_RDONLY | O_CLOEXEC));
  return kPassToKernel;
}

HookResult TestHook(long nr, const long a[6]) noexcept {
  switch (nr) {
    case SYS_getpid:
      g_getpid.fetch_add(1, std::memory_order_relaxed);
      if (g_mode == Mode::kHandleGetpid) return Handled(g_pid);
      return kPassToKernel;
    case SYS_open:
    case SYS_stat:
    case SYS_lstat:
    case SYS_access:
      return g_mode == Mode::kRewrite ? OnPath(a[0]) : kPassToKernel;
    case SYS_readlink:
      return g_mode == Mode::kRewrite && IsTestPath(a[0], "/fanstore-test") ? Handled(-EHOSTDOWN)
                                                                             : kPassToKernel;
    case SYS_readlinkat:
      return g_mode == Mode::kRewrite && IsTestPath(a[1], "/fanstore-test") ? Handled(-EHOSTDOWN)
                                                                             : kPassToKernel;
    case SYS_openat:
    case SYS_newfstatat:
    case SYS_statx:
    case SYS_faccessat:
    case SYS_faccessat2:
      return g_mode == Mode::kRewrite ? OnPath(a[1]) : kPassToKernel;
    default:
      return kPassToKernel;
  }
}

__attribute__((destructor)) void WriteCount() {
  if (!g_count_file) return;
  const long pid = ::getpid();  // counted too: reported without it
  if (FILE* f = std::fopen(g_count_file, "a")) {
    std::fprintf(f, "%ld %ld\n", pid, g_getpid.load() - 1);
    std::fclose(f);
  }
}

}  // namespace

HookSpec PreloadHookSpec() {
  const char* m = std::getenv("FANSTORE_TESTHOOK");
  if (m && std::strcmp(m, "pass") == 0) g_mode = Mode::kPass;
  if (m && std::strcmp(m, "handle-getpid") == 0) g_mode = Mode::kHandleGetpid;
  g_count_file = std::getenv("FANSTORE_TESTHOOK_COUNT_FILE");
  g_pid = RawSyscall6(SYS_getpid);
  HookSpec s;
  s.hook = &TestHook;
  if (g_mode == Mode::kPass) {
    s.interest.all = true;
  } else {
    for (long nr : {SYS_getpid, SYS_open, SYS_openat, SYS_stat, SYS_lstat, SYS_newfstatat,
                    SYS_statx, SYS_access, SYS_faccessat, SYS_faccessat2, SYS_readlink,
                    SYS_readlinkat})
      s.interest.nrs.set(nr);
  }
  return s;
}

}  // namespace fanstore::intercept
