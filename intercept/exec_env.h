// The exec policy: FanStore follows every execve. A program started with a scrubbed
// environment (env -i, subprocess env={...}) still gets the preload library in LD_PRELOAD
// and the FANSTORE_* variables the process started with, unless the new environment says
// FANSTORE_INTERCEPT=0. Capture() copies what to inject into static storage at start-up;
// Fix() builds an amended envp without allocating (it runs in vfork children), in buffers
// the caller provides on its stack.
// Thread-safety: Capture before interception starts; Fix is reentrant.
#pragma once

#include <cstddef>

namespace fanstore::intercept {

// Copies `lib_path` and the FANSTORE_* entries of `environ`. Returns false if they do not
// fit the static storage (then Fix never changes anything).
bool CaptureExecEnv(const char* lib_path, char* const* environ);

// Returns `envp` itself when nothing is missing; otherwise an amended copy in `out`
// (capacity `out_cap` pointers) whose LD_PRELOAD string lives in `scratch`. Returns
// `envp` unchanged when the buffers are too small.
char* const* FixExecEnv(char* const* envp, char** out, size_t out_cap, char* scratch,
                        size_t scratch_cap) noexcept;

}  // namespace fanstore::intercept
