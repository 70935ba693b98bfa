#include "intercept/dispatch.h"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "base/raw_syscall.h"
#include "intercept/exec_env.h"
#include "intercept/hook_stack.h"

// Top of this thread's hook stack (0 until the entry maps one). Initial-exec TLS so the
// assembly entry can reach it with one %fs-relative load.
extern "C" {
__attribute__((visibility("hidden"),
               tls_model("initial-exec"))) __thread unsigned long fanstore_hook_stack_top = 0;
}

namespace fanstore::intercept {

using base::RawSyscall6;
namespace {

Hook g_hook = nullptr;
constexpr size_t kEnvSlots = 4096;
pthread_key_t g_stack_key;
bool g_key_ok = false;
__attribute__((tls_model("initial-exec"))) __thread bool t_key_set = false;

// Thread exit: unmap the hook stack the entry mapped for this thread.
void FreeHookStack(void*) {
  const unsigned long top = fanstore_hook_stack_top;
  fanstore_hook_stack_top = 0;
  if (top)
    RawSyscall6(SYS_munmap, static_cast<long>(top - FANSTORE_HOOK_STACK_SIZE),
                FANSTORE_HOOK_STACK_SIZE);
}

HookResult ExecWithPolicy(long nr, const long a[6]) noexcept {
  // execve(path, argv, envp) / execveat(dirfd, path, argv, envp, flags)
  const int env_arg = nr == SYS_execve ? 2 : 3;
  auto* envp = reinterpret_cast<char* const*>(a[env_arg]);
  char* out[kEnvSlots];
  char scratch[8192];
  char* const* fixed = FixExecEnv(envp, out, kEnvSlots, scratch, sizeof scratch);
  if (fixed == envp) return kPassToKernel;
  long b[6] = {a[0], a[1], a[2], a[3], a[4], a[5]};
  b[env_arg] = reinterpret_cast<long>(fixed);
  return Handled(RawSyscall6(nr, b[0], b[1], b[2], b[3], b[4], b[5]));
}

}  // namespace

void SetPrefilter(Prefilter prefilter, PrefilterAgain again, const Interest& interest) {
  g_entry.prefilter = prefilter;
  g_entry.prefilter_again = again;
  g_entry.interest_all = interest.all;
  for (int i = 0; i < kMaxSyscallNr; ++i)
    if (interest.nrs.test(i)) g_entry.interest[i / 64] |= 1ul << (i % 64);
}

void SetHook(Hook hook) {
  if (!g_key_ok) g_key_ok = pthread_key_create(&g_stack_key, FreeHookStack) == 0;
  g_hook = hook;
}

}  // namespace fanstore::intercept

using namespace fanstore::intercept;

extern "C" HookResult fanstore_intercept_dispatch(long nr, long a1, long a2, long a3, long a4,
                                                  long a5, long a6) noexcept {
  // Register the thread's hook stack for unmapping at thread exit. pthread_setspecific of
  // a low key stores into the thread descriptor without allocating (vfork-child safe).
  if (!t_key_set && g_key_ok && fanstore_hook_stack_top) {
    t_key_set = true;
    pthread_setspecific(g_stack_key, reinterpret_cast<void*>(1));
  }
  const long args[6] = {a1, a2, a3, a4, a5, a6};
  HookResult r = g_hook ? g_hook(nr, args) : kPassToKernel;
  if (!r.handled && (nr == SYS_execve || nr == SYS_execveat)) r = ExecWithPolicy(nr, args);
  return r;
}
