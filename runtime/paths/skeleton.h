// Paths that reach the mount point through a native symlink the runtime was not told of (a
// config file's `/home/u/proj/data`, a link to `/datasets/imagenet` made after the job
// started) are the kernel's: it follows the link into fanrun's skeleton of the mount point
// (the dataset's directories, no files), so a file there is ENOENT and a directory lists
// no files. These calls are caught after the kernel answers: an ENOENT whose parent
// directory is physically under the mount point, or a directory opened there, is served
// again from the dataset under its physical path.
//   prefilter.cc  runs the covered calls itself when it would pass them to the kernel, and
//                 sends those two answers to the hook (closing the directory it opened);
//   hook.cc       runs a covered call the handler passed on, and on those answers serves it
//                 again with the physical path (SkeletonPath).
// The directory the kernel names in such an answer is remembered by its spelling, widened
// to the symlink's own spelling where the kernel confirms it (at most kLearned per
// process), and paths below it are served from then on without asking the kernel: a
// DataLoader reading through such a link pays for it once.
// Thread-safety: reentrant; no allocation (a vfork child may ask).
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <cstddef>
#include <cstdint>

#include "base/syscall_numbers.h"
#include "runtime/names/call_table.h"
#include "runtime/names/word_scan.h"

namespace fanstore::runtime {

// The calls covered (kSkeleton in runtime/names/call_table.h), by the position of their
// path argument (0: open, stat, lstat, access, readlink; 1: the *at calls and statx, with
// the directory fd in argument 0); -1 for the others. (Internal linkage: the prefilter's copy must
// be compiled with its own flags.)
static inline int SkeletonPathArg(long nr) {
  const CallRow& r = RowOf(nr);
  return (r.flags & kSkeleton) ? r.paths.path[0] : -1;
}

// Whether call nr opens a directory (O_DIRECTORY: opendir, os.scandir, ls, find).
static inline bool OpensDirectory(long nr, const long a[6]) {
  return (nr == SYS_open && (a[1] & O_DIRECTORY)) || (nr == SYS_openat && (a[2] & O_DIRECTORY));
}

// fanrun marks the skeleton directories it makes: their mtime is the dataset directory's
// second with these nanoseconds (bin/fanrun_skeleton.cc MakeSkeleton). One stat of an ENOENT's
// parent then tells a skeleton directory from any other on the same file system, without
// asking where it is (a native ENOENT costs one newfstatat more, not the hook).
inline constexpr long kSkeletonMarkNs = 999'999'937;

// Whether `st` is a skeleton directory: on the mount point's device (`dev`), and marked
// when the mount point is (`marked`; a mount point that existed before the job is not, nor
// is one on a file system that keeps no nanoseconds: then the device alone tells).
static inline bool IsSkeletonDir(const struct stat& st, uint64_t dev, bool marked) {
  return S_ISDIR(st.st_mode) && st.st_dev == dev &&
         (!marked || st.st_mtim.tv_nsec == kSkeletonMarkNs);
}

struct LastComponent {
  size_t start, end, len;  // the name is path[start, end); path[end, len) its slashes
};
// The last component of `path` (its trailing slashes aside) and the length of its parent
// directory's spelling: a prefix of `path`, but "." for a bare name (plen 1, not a prefix)
// and "/" for "/x". False when there is no such component (an empty path, ".", "..", a path
// of 4096 bytes or more). No library calls: the prefilter asks this of every absolute stat.
// ParentSpanOfLength is given path's length (strlen), ParentSpan measures it.
static inline bool ParentSpanOfLength(const char* path, size_t len, size_t* plen,
                                      LastComponent* c) {
  if (len == 0 || len >= 4096) return false;
  size_t end = len;
  while (end > 1 && path[end - 1] == '/') --end;
  size_t start = end;
  while (start > 0 && path[start - 1] != '/') --start;
  const size_t n = end - start;
  if (n == 0 || path[start] == '/' ||
      (path[start] == '.' && (n == 1 || (n == 2 && path[start + 1] == '.'))))
    return false;
  *plen = start <= 1 ? 1 : start - 1;  // "x" -> ".", "/x" -> "/", "a/x" -> "a"
  *c = LastComponent{start, end, len};
  return true;
}
static inline bool ParentSpan(const char* path, size_t* plen, LastComponent* c) {
  return ParentSpanOfLength(path, WordStrlen(path), plen, c);
}

// The same, with the parent NUL-terminated in parent[4096].
static inline bool ParentOf(const char* path, char (&parent)[4096], LastComponent* c) {
  size_t plen;
  if (!ParentSpan(path, &plen, c)) return false;
  for (size_t i = 0; i < plen; ++i) parent[i] = c->start == 0 ? '.' : path[i];
  parent[plen] = 0;
  return true;
}

// After the kernel answered covered call nr with `k`: if it looked for something in the
// skeleton (ENOENT below one of its directories, or one of them opened), the physical path
// it meant, in out[room]; false otherwise (the kernel's answer stands).
bool SkeletonPath(long nr, const long a[6], long k, char* out, size_t room);

// The physical path of absolute `path`, in out[room], when it is at or under a spelling
// learned by SkeletonPath; false otherwise.
bool LearnedPath(const char* path, char* out, size_t room);
// The same for `path` relative to dirfd: a relative path from the cwd is first joined to
// the kernel's cwd (one getcwd); one from another directory fd is not looked up.
bool LearnedPathAt(int dirfd, const char* path, char* out, size_t room);

}  // namespace fanstore::runtime
