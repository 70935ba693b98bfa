// The interface between the interception layer and whoever handles system calls (the
// FanStore runtime, or a test hook). One function sees every intercepted call.
// Thread-safety: the hook is called concurrently from every thread, from signal handlers
// (possibly nested in a hook already running on the same thread) and from vfork children
// sharing the parent's memory: there it must not allocate, lock or change shared state.
#pragma once

#include "intercept/planner.h"

namespace fanstore::intercept {

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
// only, such as a stat found by one hash probe). It must be compiled with
// -mgeneral-regs-only (so the compiler cannot touch vector state) and call nothing.
// nullptr: the hook sees every call.
enum PrefilterAction : long { kToKernel = 0, kToHook = 1, kAnswered = 2 };
struct PrefilterResult {
  long value;   // the result, for kAnswered
  long action;  // PrefilterAction
};
using Prefilter = PrefilterResult (*)(long nr, const long args[6]) noexcept;

struct HookSpec {
  Hook hook = nullptr;
  Prefilter prefilter = nullptr;
  Interest interest;        // sites of other (known) numbers are left unpatched
  bool full_xsave = false;  // save the whole XCR0 state with XSAVEC (cpu_state.h, mode 3)
};

}  // namespace fanstore::intercept
