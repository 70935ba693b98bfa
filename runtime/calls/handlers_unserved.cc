// The path-taking calls the runtime does not serve (runtime/names/unserved_calls.h): EROFS on a
// dataset path, the kernel's everywhere else.
#include <fcntl.h>

#include <cerrno>

#include "runtime/calls/handlers.h"
#include "runtime/names/call_table.h"
#include "runtime/paths/resolve.h"

namespace fanstore::runtime {
namespace {

// Whether (dirfd, path) names a dataset entry, or a name in a dataset directory.
bool InDataset(long dirfd, const char* path) {
  if (!path) return false;
  if (Resolve(dirfd, path, kFollow | kEmptyOk).kind == Resolved::kVirtual) return true;
  if (Resolve(dirfd, path, kEmptyOk).kind == Resolved::kVirtual) return true;
  std::string_view p(path);
  while (p.size() > 1 && p.back() == '/') p.remove_suffix(1);
  const size_t slash = p.rfind('/');
  if (slash == std::string_view::npos)
    return Resolve(dirfd, ".", kFollow).kind == Resolved::kVirtual;
  const std::string parent(p.substr(0, slash == 0 ? 1 : slash));
  return Resolve(dirfd, parent.c_str(), kFollow).kind == Resolved::kVirtual;
}

}  // namespace

HookResult OnUnserved(long nr, const long a[6]) {
  const CallRow& row = RowOf(nr);  // its (dirfd, path) pairs, runtime/names/call_table.h
  for (int k = 0; k < 2 && row.paths.path[k] >= 0; ++k) {
    const int d = row.paths.dirfd[k];
    const long dirfd = d >= 0 ? a[d] : AT_FDCWD;
    if (InDataset(dirfd, reinterpret_cast<const char*>(a[row.paths.path[k]])))
      return Handled(-EROFS);
  }
  return kPassToKernel;
}

}  // namespace fanstore::runtime
