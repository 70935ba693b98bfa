#include "runtime/skeleton.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "intercept/raw_syscall.h"
#include "runtime/prefilter_state.h"
#include "runtime/state.h"

namespace fanstore::runtime {
namespace {

using intercept::RawSyscall6;

// The physical path of directory fd into out[room], NUL-terminated, when it is the mount
// point or under it: its length; 0 otherwise.
size_t UnderMountByFd(const State& s, int fd, char* out, size_t room) {
  char link[32];
  ProcFdPath(fd, link);
  const long n = RawSyscall6(SYS_readlinkat, AT_FDCWD, reinterpret_cast<long>(link),
                             reinterpret_cast<long>(out), static_cast<long>(room));
  if (n <= 0 || static_cast<size_t>(n) >= room) return 0;  // (filling its room: maybe cut)
  out[n] = 0;
  const std::string_view p(out, static_cast<size_t>(n)), m = s.physical_mount();
  const bool under = m == "/" || p == m ||
                     (p.size() > m.size() && p.substr(0, m.size()) == m && p[m.size()] == '/');
  return under ? static_cast<size_t>(n) : 0;
}

bool OnSkeletonDevice(const struct stat& st) {
  return S_ISDIR(st.st_mode) && st.st_dev == g_prefilter.skeleton_dev;
}

}  // namespace

bool SkeletonPath(long nr, const long a[6], long k, char* out, size_t room) {
  const State* s = Get();
  const int pa = SkeletonPathArg(nr);
  if (!s || g_prefilter.skeleton_dev == 0 || pa < 0) return false;
  struct stat st;
  if (k >= 0) {  // a directory opened: is it one of the skeleton's?
    return OpensDirectory(nr, a) && RawSyscall6(SYS_fstat, k, reinterpret_cast<long>(&st)) == 0 &&
           OnSkeletonDevice(st) && UnderMountByFd(*s, static_cast<int>(k), out, room) > 0;
  }
  if (k != -ENOENT) return false;
  // ENOENT: is the parent directory one of the skeleton's? (The kernel read the path, so
  // it is readable.)
  const char* path = reinterpret_cast<const char*>(a[pa]);
  const int dirfd = pa == 1 ? static_cast<int>(a[0]) : AT_FDCWD;
  const size_t len = strnlen(path, 4096);
  if (len == 0 || len >= 4096) return false;
  size_t end = len;  // the last component: [start, end)
  while (end > 1 && path[end - 1] == '/') --end;
  size_t start = end;
  while (start > 0 && path[start - 1] != '/') --start;
  const std::string_view name(path + start, end - start);
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string_view::npos)
    return false;
  char parent[4096];
  if (start == 0) {
    std::memcpy(parent, ".", 2);
  } else {
    const size_t plen = start == 1 ? 1 : start - 1;  // "/x" -> "/", "a/x" -> "a"
    std::memcpy(parent, path, plen);
    parent[plen] = 0;
  }
  if (RawSyscall6(SYS_newfstatat, dirfd, reinterpret_cast<long>(parent),
                  reinterpret_cast<long>(&st), 0) != 0 ||
      !OnSkeletonDevice(st))
    return false;  // (one system call for an ENOENT elsewhere: Python's imports make many)
  const long fd = RawSyscall6(SYS_openat, dirfd, reinterpret_cast<long>(parent),
                              O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool slash = len > end;  // a trailing slash is kept: directories only
  const size_t tail = 1 + name.size() + slash;
  const size_t n = room > tail + 1 ? UnderMountByFd(*s, static_cast<int>(fd), out, room - tail) : 0;
  RawSyscall6(SYS_close, fd);
  if (n == 0) return false;
  size_t at = n;
  if (out[at - 1] != '/') out[at++] = '/';  // (the mount point "/" ends in one)
  std::memcpy(out + at, name.data(), name.size());
  at += name.size();
  if (slash) out[at++] = '/';
  out[at] = 0;
  return true;
}

}  // namespace fanstore::runtime
