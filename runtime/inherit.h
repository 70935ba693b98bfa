// Virtual fds across exec. A program exec'd by a process that holds virtual fds without
// FD_CLOEXEC (a shell's `cmd < file`, Python's subprocess with stdin=open(...)) inherits
// the placeholders, which alone would read as EBADF. So the exec passes them on in one
// environment variable, FANSTORE_FDS: the slab's memfd (kept open across this exec) and
// each surviving fd's description. The new program maps the same slab, so offsets stay
// shared with the old program's other processes as POSIX says (`(head -c 4; cat) < f`).
//   FANSTORE_FDS=<slab fd> k<fd>.<desc>... a<fd>.<desc>... r<desc>...
//     k  an fd whose reference the old program counted
//     a  an fd copied by a vfork child (never counted): the new program counts it
//     r  a description whose fd exec closed (FD_CLOEXEC): the new program drops it
// In a vfork child the runtime's tables are the parent's, while the child's fds are its
// own copy, changed by dup2/close_range the runtime did not record; so there each
// candidate (the parent's virtual fds, and stdin/stdout/stderr) is checked with
// kcmp(KCMP_FILE) against the parent's fds.
// Not covered: a program without the runtime (static, FANSTORE_INTERCEPT=0) sees
// placeholders that fail with EBADF.
// Thread-safety: EncodeForExec allocates nothing (vfork children); AdoptInherited runs once
// at start-up.
#pragma once

#include <cstddef>

namespace fanstore::runtime {

// The slab fd named by FANSTORE_FDS, or -1.
int InheritedSlabFd();
// Binds the fds FANSTORE_FDS names (each checked: an O_PATH placeholder, a live
// description of an existing entry) and removes the variable from the environment.
void AdoptInherited();
// Writes "FANSTORE_FDS=..." into buf (capacity cap) for an exec about to happen; false
// when no virtual fd would survive it.
bool EncodeForExec(char* buf, size_t cap, bool vfork_child);
// `env` without any FANSTORE_FDS entry, plus `var` if not null, in `out` (which `env` may
// already be); `env` itself when out's capacity is too small.
char* const* WithFdsVar(char* const* env, char** out, size_t cap, const char* var);
// execve/execveat with the slab's memfd inheritable for exactly this call when `passing`.
long ExecPassingFds(long nr, const long b[6], bool passing);

}  // namespace fanstore::runtime
