// Path resolution: decides whether a (dirfd, path) pair names something in the dataset,
// following the kernel's rules: absolute paths under the mount point, relative paths
// against the (virtual) current directory or a virtual directory fd, ".", "..", repeated
// slashes, a trailing slash (directories only), and symlinks inside the dataset (40 hops,
// then ELOOP). A path that leaves the dataset ("..", or a symlink pointing outside) is
// handed back as a native absolute path for the kernel.
// Thread-safety: Resolve is reentrant; the cwd is process-local, set by chdir and fchdir
// through SetCwdVirtual / SetCwdNative (atomics: any thread may read it).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/paths/resolved.h"

namespace fanstore::runtime {

Resolved Resolve(long dirfd, const char* path, int flags);
// If `path` is a link to one of this process's virtual fds (/proc/self/fd/N,
// /proc/thread-self/fd/N, /proc/<pid>/fd/N, /dev/fd/N, /dev/stdin, /dev/stdout,
// /dev/stderr), its fd, with what follows the link in *rest ("" or "/..."); else -1.
int FdLink(std::string_view path, std::string_view* rest);
// If `path` starts with this process's cwd link in /proc (/proc/self/cwd,
// /proc/thread-self/cwd, /proc/<pid>/cwd), that prefix's length; else 0.
size_t CwdLinkLength(std::string_view path);
// The absolute path of an entry under the mount point.
std::string MountPath(uint32_t entry);  // (spelled as the kernel does: State::physical_mount)
// The cached current directory: an entry when it is inside the dataset.
bool CwdIsVirtual(uint32_t* entry);
void SetCwdVirtual(uint32_t entry);  // also records the kernel's cwd at that moment
void SetCwdNative();
// The kernel's cwd (st_dev, st_ino); false if it cannot be stat'ed.
bool KernelCwdId(uint64_t* dev, uint64_t* ino);
// For an exec: the virtual cwd and the kernel cwd the new program will start in, when the
// cwd is virtual and the kernel cwd is still the one it was set with (a vfork child that
// chdir'ed natively, or a process whose kernel cwd moved, passes nothing). No allocation.
bool CwdForExec(uint32_t* entry, uint64_t* dev, uint64_t* ino);
// chdir in a vfork child, which must not change the parent's cwd: a directory of the
// dataset is recorded for the child's exec (CwdForExec); anything else goes to the kernel.
long ChdirInVforkChild(const char* path);
// At start-up: takes `entry` as the cwd if it is a directory and the kernel cwd is (dev, ino).
bool AdoptCwd(uint32_t entry, uint64_t dev, uint64_t ino);

}  // namespace fanstore::runtime
