// A call's arguments read through its row of the call table (runtime/names/call_table.h):
// a handler asks for the fd, the (dirfd, path) pair and the arguments that follow the
// path, and the row says where each is, so no handler repeats a position the table holds
// (execve's path is a[0], execveat's a[1]; stat's buffer follows its path, newfstatat's
// flags come two after it). An accessor costs an index into the row the hook has read
// already for the call (OnParkedFd).
// Thread-safety: a view of one call's argument array, used by that call alone.
#pragma once

#include <fcntl.h>

#include "runtime/names/call_table.h"

namespace fanstore::runtime {

class Args {
 public:
  Args(long nr, const long a[6]) : row_(RowOf(nr)), a_(a) {}
  // Argument i as the kernel would get it: a size, a buffer, flags the row does not name.
  long operator[](int i) const { return a_[i]; }
  // The k-th fd the row names (in argument order): fstat's a[0], mmap's a[4], ...
  long fd(int k = 0) const {
    for (unsigned m = row_.fds, i = 0; m; m >>= 1, ++i)
      if ((m & 1) && k-- == 0) return a_[i];
    return -1;
  }
  // Whether pair k takes a directory fd (the *at form of a call).
  bool at(int k = 0) const { return row_.paths.dirfd[k] >= 0; }
  // Pair k's directory fd: AT_FDCWD where its path is relative to the cwd.
  long dirfd(int k = 0) const { return at(k) ? a_[row_.paths.dirfd[k]] : AT_FDCWD; }
  // Pair k's path (nullptr for a row without one).
  const char* path(int k = 0) const {
    const int p = row_.paths.path[k];
    return p >= 0 ? reinterpret_cast<const char*>(a_[p]) : nullptr;
  }
  // The position of pair k's path, and the argument n places after it (stat's buffer is
  // after_path(1); newfstatat's flags after_path(2); execve's envp after_path(2)).
  int path_arg(int k = 0) const { return row_.paths.path[k]; }
  long after_path(int n, int k = 0) const { return a_[row_.paths.path[k] + n]; }
  const CallRow& row() const { return row_; }

 private:
  const CallRow& row_;
  const long* a_;
};

}  // namespace fanstore::runtime
