// The types a hook and a prefilter are called with, and the prefilter's tables. Nothing
// else, and no include: the prefilter translation units (compiled without vector
// registers) include this, and with some compilers (gcc 10) a header that merely defines
// an inline function returning floating point fails to compile there.
// Thread-safety: plain types; the tables are written once, before any site is patched.
#pragma once

// The code every intercepted call runs (the entry's first part, the prefilters' first
// stages) is kept together in one section, which the linker places with .text.hot: the fewer
// pages a call touches, the fewer TLB misses after each system call (docs/design.md).
#define FANSTORE_HOT_TEXT __attribute__((section(".text.hot.fanstore")))

namespace fanstore::intercept {

inline constexpr int kMaxSyscallNr = 512;

struct HookResult {
  long value;    // the kernel-style result (-errno on error) when handled
  long handled;  // 0: run the original system call
};

inline constexpr HookResult kPassToKernel{0, 0};
inline HookResult Handled(long v) {
  return HookResult{v, 1};
}

// `args` are the six argument registers (rdi, rsi, rdx, r10, r8, r9). noexcept: no
// exception may cross the preload boundary.
using Hook = HookResult (*)(long nr, const long args[6]) noexcept;

// A prefilter runs before the vector registers are saved and decides: the call goes
// straight to the kernel (a path outside the dataset, an fd that is not virtual), to the
// hook, or it is answered right there (calls simple enough to serve with general registers
// only, such as a stat found by one hash probe). It must be compiled so that the compiler
// cannot touch vector or x87 state (-mgeneral-regs-only with gcc; see runtime/CMakeLists.txt
// for clang) and call nothing; tests/intercept/prefilter_object_test.sh checks both.
// nullptr: the hook sees every call.
// It runs on the application's stack, so its frames must stay small (each prefilter
// translation unit is built with -Werror=frame-larger-than); work that needs more stack
// returns kAgain, and the entry calls the second stage on the hook stack, vector registers
// still unsaved, with `value` as `done`.
enum PrefilterAction : long { kToKernel = 0, kToHook = 1, kAnswered = 2, kAgain = 3 };
struct PrefilterResult {
  long value;   // the result, for kAnswered; what the second stage gets, for kAgain
  long action;  // PrefilterAction
};
using Prefilter = PrefilterResult (*)(long nr, const long args[6]) noexcept;
using PrefilterAgain = PrefilterResult (*)(long nr, const long args[6], long done) noexcept;

// The prefilter entry's tables (entry_prefilter.cc), filled by SetPrefilter (dispatch.h),
// in one aligned block: a call reads one cache line of them (the pointers share it with
// the interest bits of numbers below 320, which most calls have).
struct alignas(64) EntryTables {
  Prefilter prefilter = nullptr;
  PrefilterAgain prefilter_again = nullptr;
  bool interest_all = false;
  unsigned long interest[kMaxSyscallNr / 64] = {};
};
extern EntryTables g_entry;

}  // namespace fanstore::intercept
