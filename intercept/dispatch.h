// The dispatcher: the C++ side of the assembly entry. It calls the installed hook and, for
// execve/execveat the hook passes on, applies the exec policy (exec_env.h) by making the
// call itself with the amended environment.
// Thread-safety: SetHook before patching; Dispatch runs concurrently on every thread.
#pragma once

#include "intercept/hook_api.h"

namespace fanstore::intercept {
void SetHook(Hook hook);
// The prefilter and the interest set checked at run time (for sites whose number is not
// known from the code). Both are read by fanstore_intercept_prefilter (entry_prefilter.cc).
void SetPrefilter(Prefilter prefilter, PrefilterAgain again, const Interest& interest);
}  // namespace fanstore::intercept

// {value, action} in rax:rdx: kToKernel executes the system call directly, kToHook calls
// fanstore_intercept_dispatch, kAnswered returns `value`. Compiled with
// -mgeneral-regs-only: it runs before the entry saves the vector registers.
extern "C" fanstore::intercept::PrefilterResult fanstore_intercept_prefilter(long nr, long a1,
                                                                             long a2, long a3,
                                                                             long a4, long a5,
                                                                             long a6) noexcept;
// The prefilter's second stage (call_abi.h kAgain), on the hook stack.
extern "C" fanstore::intercept::PrefilterResult fanstore_intercept_prefilter_again(
    long nr, long a1, long a2, long a3, long a4, long a5, long a6, long done) noexcept;

extern "C" fanstore::intercept::HookResult fanstore_intercept_dispatch(long nr, long a1, long a2,
                                                                       long a3, long a4, long a5,
                                                                       long a6) noexcept;
