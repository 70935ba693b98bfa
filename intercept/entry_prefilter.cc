// Compiled with -mgeneral-regs-only (see CMakeLists.txt): this runs before the assembly
// entry has saved any vector register, so neither it nor anything it calls may touch one.
#include "base/syscall_numbers.h"
#include "intercept/call_abi.h"

namespace fanstore::intercept {
EntryTables g_entry;
}  // namespace fanstore::intercept

using namespace fanstore::intercept;

// Declared in dispatch.h (which this file must not include: see call_abi.h).
extern "C" FANSTORE_HOT_TEXT PrefilterResult fanstore_intercept_prefilter(long nr, long a1, long a2,
                                                                          long a3, long a4, long a5,
                                                                          long a6) noexcept {
  if (nr == SYS_execve || nr == SYS_execveat) return {0, kToHook};  // the exec policy
  if (!g_entry.interest_all &&
      (nr < 0 || nr >= kMaxSyscallNr || !(g_entry.interest[nr / 64] >> (nr % 64) & 1ul)))
    return {0, kToKernel};
  if (!g_entry.prefilter) return {0, kToHook};
  const long args[6] = {a1, a2, a3, a4, a5, a6};
  return g_entry.prefilter(nr, args);
}

extern "C" PrefilterResult fanstore_intercept_prefilter_again(long nr, long a1, long a2, long a3,
                                                              long a4, long a5, long a6,
                                                              long done) noexcept {
  // (kAgain without a second stage: the prefilter has made the call; its result stands.)
  if (!g_entry.prefilter_again) return {done, kAnswered};
  const long args[6] = {a1, a2, a3, a4, a5, a6};
  return g_entry.prefilter_again(nr, args, done);
}
