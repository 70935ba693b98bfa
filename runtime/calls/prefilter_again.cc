// The prefilter's second stage (intercept/call_abi.h kAgain): after the first stage
// (prefilter.cc) made a path call runtime/paths/skeleton.h covers, whether the kernel's answer
// came from the mount point's skeleton. It needs path buffers, so it runs on the hook stack;
// like the first stage it runs before any vector register is saved and calls nothing
// (the same compile options, without the first stage's frame bound).
#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>

#include "base/raw_syscall.h"
#include "intercept/clone_mark.h"
#include "meta/path_hash.h"
#include "runtime/names/kernel_names.h"
#include "runtime/names/word_scan.h"
#include "runtime/paths/skeleton.h"
#include "runtime/process/prefilter_state.h"

namespace fanstore::runtime {
namespace {

// Whether directory fd, which the first stage found on the skeleton's device and with its
// mark (prefilter.cc SurelyNotSkeleton), is physically under the mount point: then it is
// one of the skeleton's directories (runtime/paths/skeleton.h). One system call.
bool UnderMountPoint(int fd) {
  char where[4096];
  const long n = FdName(fd, where, sizeof where);
  if (n < 0) return false;
  where[n] = 0;
  const auto& m = g_prefilter.spellings[g_prefilter.physical];
  return UnderPrefix(where, m.path, m.len);
}

// Whether path s itself, from dirfd, is a skeleton directory (one newfstatat).
bool SelfInSkeleton(long dirfd, const char* s) {
  struct stat st;
  return base::RawSyscall6(SYS_newfstatat, static_cast<int>(dirfd), reinterpret_cast<long>(s),
                           reinterpret_cast<long>(&st), 0) == 0 &&
         IsSkeletonDir(st, g_prefilter.skeleton_dev, g_prefilter.skeleton_marked);
}

// Whether the parent directory of path s's last component, from dirfd, is a skeleton
// directory (one newfstatat).
// An absolute parent that was found to be a native directory, not the skeleton's, is
// remembered by its spelling's hash (direct-mapped, kNativeParents slots): PATH lookups and
// Python's imports miss in the same few directories again and again, and each miss cost a
// newfstatat of its parent. A directory replaced by a link into the dataset after such a
// miss is not seen (docs/design.md).
bool ParentInSkeleton(long dirfd, const char* s) {
  char parent[4096];
  LastComponent c;
  struct stat st;
  if (!ParentOf(s, parent, &c)) return false;
  uint64_t h = 0;
  std::atomic<uint64_t>* slot = nullptr;
  if (parent[0] == '/') {  // (the first stage has looked for it already)
    slot = &NativeParentSlot(parent, WordStrlen(parent), &h);
    if (slot->load(std::memory_order_relaxed) == h) return false;
  }
  if (base::RawSyscall6(SYS_newfstatat, static_cast<int>(dirfd), reinterpret_cast<long>(parent),
                        reinterpret_cast<long>(&st), 0) != 0 ||
      !S_ISDIR(st.st_mode))
    return false;
  if (IsSkeletonDir(st, g_prefilter.skeleton_dev, g_prefilter.skeleton_marked)) return true;
  if (slot) slot->store(h, std::memory_order_relaxed);
  return false;
}

}  // namespace

intercept::PrefilterResult RuntimePrefilterAgain(long nr, const long a[6], long k) noexcept {
  using intercept::kAnswered;
  using intercept::kToHook;
  const int at = SkeletonPathArg(nr);
  const char* path = reinterpret_cast<const char*>(a[at]);
  const long dirfd = at == 1 ? a[0] : AT_FDCWD;
  // The hook makes the call again, and looks.
  if (k == -ENOENT || k == -EACCES)
    return {k, ParentInSkeleton(dirfd, path) || (k == -EACCES && SelfInSkeleton(dirfd, path))
                   ? kToHook
                   : kAnswered};
  if (UnderMountPoint(static_cast<int>(k))) {  // a directory opened (RuntimePrefilter)
    base::RawSyscall6(SYS_close, k);
    return {0, kToHook};
  }
  SetNativeDir(k, !intercept::t_clone_child);
  return {k, kAnswered};
}

}  // namespace fanstore::runtime
