// The clone mark: tells code that runs in a vfork child apart from its parent without a
// system call. A vfork child (vfork, or posix_spawn's clone with CLONE_VM|CLONE_VFORK)
// shares the parent's memory and thread pointer, so it sees the parent's thread-local
// state; the runtime must not change shared tables there. Asking getpid() every time cost
// ~4 system calls per file read. Instead every clone, clone3 and vfork site of libc is
// patched with a stub that runs the system call itself (no hook, no stack: a vfork child
// returns on the parent's stack, a new thread on an empty one), with this thread-local
// byte set to 1 before the call and, after it, left at 1 where the call returned 0 (any
// child) and cleared where it returned a pid or an error (the parent). A mark set in a forked child
// or a new thread is a false alarm the runtime clears after one getpid; a mark that is 0 is
// trustworthy once CloneMarkComplete(). Thread-safety: the byte is per thread; the completeness
// flag is written once, by Install.
#pragma once

#include <cstdint>

namespace fanstore::intercept {

extern thread_local constinit uint8_t t_clone_child __attribute__((tls_model("initial-exec")));

// The mark's offset from the thread pointer (%fs base; tpidr_el0), the same in every thread.
int32_t CloneMarkTlsOffset();
// True once every clone/clone3/vfork site (and every site whose number is only known at
// run time) writes the mark; false if interception is off or a site was refused, and then
// the mark says nothing.
bool CloneMarkComplete();
void SetCloneMarkComplete(bool complete);

}  // namespace fanstore::intercept
