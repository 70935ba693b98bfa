// Compiled with -mgeneral-regs-only (see CMakeLists.txt): this runs before the assembly
// entry has saved any vector register, so neither it nor anything it calls may touch one.
#include <sys/syscall.h>

#include "intercept/dispatch.h"

namespace fanstore::intercept {
namespace {
Prefilter g_prefilter = nullptr;
uint64_t g_interest[kMaxSyscallNr / 64];
bool g_all = false;
}  // namespace

void SetPrefilter(Prefilter prefilter, const Interest& interest) {
  g_prefilter = prefilter;
  g_all = interest.all;
  for (int i = 0; i < kMaxSyscallNr; ++i)
    if (interest.nrs.test(i)) g_interest[i / 64] |= uint64_t{1} << (i % 64);
}

}  // namespace fanstore::intercept

using namespace fanstore::intercept;

extern "C" PrefilterResult fanstore_intercept_prefilter(long nr, long a1, long a2, long a3, long a4,
                                                        long a5, long a6) noexcept {
  if (nr == SYS_execve || nr == SYS_execveat) return {0, kToHook};  // the exec policy
  if (!g_all && (nr < 0 || nr >= kMaxSyscallNr || !(g_interest[nr / 64] >> (nr % 64) & 1)))
    return {0, kToKernel};
  if (!g_prefilter) return {0, kToHook};
  const long args[6] = {a1, a2, a3, a4, a5, a6};
  return g_prefilter(nr, args);
}
