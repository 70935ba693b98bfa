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
// The virtual cwd goes the same way, in FANSTORE_CWD=<entry>.<st_dev>.<st_ino>: a process
// whose cwd is in the dataset has the kernel cwd fanrun's skeleton directory, or, where
// fanrun could not make it (a read-only parent of the mount point), whatever directory it
// was in before. The new program takes the entry as its cwd when its kernel cwd is the one
// recorded, so `cd /mnt/train && python3 x.py` works in both cases.
// Not covered: a program without the runtime (static, FANSTORE_INTERCEPT=0) sees
// placeholders that fail with EBADF.
// Thread-safety: EncodeForExec allocates nothing (vfork children); AdoptInherited runs once
// at start-up.
#pragma once

#include <cstddef>

namespace fanstore::runtime {

// Binds the fds FANSTORE_FDS names (each checked: an O_PATH placeholder, a live
// description of an existing entry) and removes the variable from the environment.
void AdoptInherited();
// Takes the cwd FANSTORE_CWD names (checked: a directory, and the kernel cwd recorded with
// it) and removes the variable from the environment.
void AdoptInheritedCwd();
// Writes "FANSTORE_CWD=..." into buf for an exec about to happen; false when the cwd is not
// virtual or the kernel cwd is no longer the one it was set with. Allocates nothing.
bool EncodeCwdForExec(char* buf, size_t cap);
// Writes "FANSTORE_FDS=..." into buf (capacity cap) for an exec about to happen; false
// when no virtual fd would survive it.
bool EncodeForExec(char* buf, size_t cap, bool vfork_child);
// `env` without any FANSTORE_FDS or FANSTORE_CWD entry, plus those of fds_var and cwd_var
// that are not null, in `out` (which `env` may already be); `env` itself when out's
// capacity is too small.
char* const* WithInheritVars(char* const* env, char** out, size_t cap, const char* fds_var,
                             const char* cwd_var);
// execve/execveat with the slab's memfd inheritable for exactly this call when `passing`.
long ExecPassingFds(long nr, const long b[6], bool passing);

}  // namespace fanstore::runtime
