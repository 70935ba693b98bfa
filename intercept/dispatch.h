// The dispatcher: the C++ side of the assembly entry. It calls the installed hook and, for
// execve/execveat the hook passes on, applies the exec policy (exec_env.h) by making the
// call itself with the amended environment.
// Thread-safety: SetHook before patching; Dispatch runs concurrently on every thread.
#pragma once

#include "intercept/hook_api.h"

namespace fanstore::intercept {
void SetHook(Hook hook);
}  // namespace fanstore::intercept

extern "C" fanstore::intercept::HookResult fanstore_intercept_dispatch(long nr, long a1, long a2,
                                                                       long a3, long a4, long a5,
                                                                       long a6) noexcept;
