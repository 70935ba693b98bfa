#include "runtime/skeleton.h"

#include <sys/stat.h>

#include <algorithm>
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

// Whether `p` is absolute and clean: no empty, "." or ".." component, no trailing '/'
// (then its prefixes are directories the kernel resolves the same way).
bool Clean(std::string_view p) {
  if (p.size() < 2 || p[0] != '/' || p.back() == '/') return false;
  for (size_t i = 1; i <= p.size();) {
    const size_t j = std::min(p.find('/', i), p.size());
    const std::string_view c = p.substr(i, j - i);
    if (c.empty() || c == "." || c == "..") return false;
    i = j + 1;
  }
  return true;
}

// Whether physical path p is the mount point or under it.
bool AtOrUnder(std::string_view p, std::string_view m) {
  return m == "/" || p == m ||
         (p.size() > m.size() && p.substr(0, m.size()) == m && p[m.size()] == '/');
}

// Remembers that the kernel resolves directory `spelled` (absolute, clean) to `physical` at
// or under the mount point. Widened first: the shortest spelling whose last components
// are physical's too and that the kernel resolves to what remains of physical (for
// /p/data/train/n01 -> /mnt/x/train/n01 with /p/data -> /mnt/x: /p/data -> /mnt/x), so
// that one slot serves a whole link.
void Learn(const State& s, std::string_view spelled, std::string_view physical) {
  if (!Clean(spelled) || g_prefilter.learned_count.load(std::memory_order_relaxed) >= kLearned)
    return;
  const std::string_view m = s.physical_mount();
  // Cut points: both end in the same components from there on.
  std::string_view from = spelled, to = physical;
  size_t cuts = 0, cut_from[64], cut_to[64];
  for (;;) {
    const size_t f = from.rfind('/'), t = to.rfind('/');
    if (f == 0 || f == std::string_view::npos || t == std::string_view::npos ||
        from.substr(f) != to.substr(t) || !AtOrUnder(to.substr(0, t), m) || cuts == 64)
      break;
    from = from.substr(0, f);
    to = to.substr(0, t == 0 ? 1 : t);
    cut_from[cuts] = from.size();
    cut_to[cuts++] = to.size();
  }
  size_t use_from = spelled.size(), use_to = physical.size();
  char name[1024], where[1024];
  for (size_t c = cuts; c-- > 0;) {  // the shortest first
    if (cut_from[c] >= sizeof name) continue;
    std::memcpy(name, spelled.data(), cut_from[c]);
    name[cut_from[c]] = 0;
    const long fd = RawSyscall6(SYS_openat, AT_FDCWD, reinterpret_cast<long>(name),
                                O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) continue;
    char link[32];
    ProcFdPath(static_cast<int>(fd), link);
    const long n = RawSyscall6(SYS_readlinkat, AT_FDCWD, reinterpret_cast<long>(link),
                               reinterpret_cast<long>(where), sizeof where);
    RawSyscall6(SYS_close, fd);
    if (n > 0 && static_cast<size_t>(n) < sizeof where &&
        std::string_view(where, static_cast<size_t>(n)) == physical.substr(0, cut_to[c])) {
      use_from = cut_from[c];
      use_to = cut_to[c];
      break;
    }
  }
  if (use_from >= sizeof name || use_to >= sizeof where) return;
  for (PrefilterState::Learned& l : g_prefilter.learned) {
    int free = 0;
    if (l.state.load(std::memory_order_acquire) == 2 && l.from_len == use_from &&
        std::memcmp(l.from, spelled.data(), use_from) == 0)
      return;  // (another thread was first)
    if (!l.state.compare_exchange_strong(free, 1, std::memory_order_acq_rel)) continue;
    std::memcpy(l.from, spelled.data(), use_from);
    l.from[use_from] = 0;
    l.from_len = static_cast<unsigned>(use_from);
    std::memcpy(l.to, physical.data(), use_to);
    l.to[use_to] = 0;
    l.to_len = static_cast<unsigned>(use_to);
    l.state.store(2, std::memory_order_release);
    g_prefilter.learned_count.fetch_add(1, std::memory_order_release);
    return;
  }
}

// `path` as an absolute spelling in out[room]: itself, or joined to the kernel's cwd
// (physical) when relative to it; false when it does not fit or the cwd cannot be named.
bool Absolute(int dirfd, std::string_view path, char* out, size_t room) {
  size_t n = 0;
  if (path.empty() || path[0] != '/') {
    if (dirfd != AT_FDCWD) return false;
    const long c = RawSyscall6(SYS_getcwd, reinterpret_cast<long>(out), static_cast<long>(room));
    if (c <= 1 || out[0] != '/') return false;
    n = static_cast<size_t>(c - 1);  // (getcwd counts the NUL)
    if (path == ".") path = {};
    if (n > 1 && !path.empty()) out[n++] = '/';
  }
  if (n + path.size() >= room) return false;
  std::memcpy(out + n, path.data(), path.size());
  out[n + path.size()] = 0;
  return true;
}

}  // namespace

bool LearnedPathAt(int dirfd, const char* path, char* out, size_t room) {
  if (g_prefilter.learned_count.load(std::memory_order_acquire) == 0) return false;
  if (path[0] == '/') return LearnedPath(path, out, room);
  char joined[4096];  // (relative: one getcwd, against six calls through the skeleton)
  return Absolute(dirfd, path, joined, sizeof joined) && LearnedPath(joined, out, room);
}

bool LearnedPath(const char* path, char* out, size_t room) {
  if (g_prefilter.learned_count.load(std::memory_order_acquire) == 0 || path[0] != '/')
    return false;
  const std::string_view p(path, strnlen(path, 4096));
  for (const PrefilterState::Learned& l : g_prefilter.learned) {
    if (l.state.load(std::memory_order_acquire) != 2) continue;
    const std::string_view from(l.from, l.from_len), to(l.to, l.to_len);
    // Below it only: the spelling itself may end in the link, which lstat, readlink and
    // O_NOFOLLOW see as a link (the kernel's answer then stands).
    if (p.size() <= from.size() || p[from.size()] != '/' || p.substr(0, from.size()) != from)
      continue;
    const std::string_view rest = p.substr(from.size());  // "/..."
    if (to.size() + rest.size() >= room) return false;
    std::memcpy(out, to.data(), to.size());
    std::memcpy(out + to.size(), rest.data(), rest.size());
    out[to.size() + rest.size()] = 0;
    return true;
  }
  return false;
}

bool SkeletonPath(long nr, const long a[6], long k, char* out, size_t room) {
  const State* s = Get();
  const int pa = SkeletonPathArg(nr);
  if (!s || g_prefilter.skeleton_dev == 0 || pa < 0) return false;
  struct stat st;
  if (k >= 0) {  // a directory opened: is it one of the skeleton's?
    if (!OpensDirectory(nr, a) || RawSyscall6(SYS_fstat, k, reinterpret_cast<long>(&st)) != 0 ||
        !OnSkeletonDevice(st))
      return false;
    const size_t n = UnderMountByFd(*s, static_cast<int>(k), out, room);
    if (n == 0) return false;
    std::string_view spelled(reinterpret_cast<const char*>(a[pa]));
    while (spelled.size() > 1 && spelled.back() == '/') spelled.remove_suffix(1);
    char absolute[4096];
    if (Absolute(pa == 1 ? static_cast<int>(a[0]) : AT_FDCWD, spelled, absolute, sizeof absolute))
      Learn(*s, absolute, std::string_view(out, n));
    return true;
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
  char absolute[4096];
  if (Absolute(dirfd, parent, absolute, sizeof absolute))
    Learn(*s, absolute, std::string_view(out, n));
  size_t at = n;
  if (out[at - 1] != '/') out[at++] = '/';  // (the mount point "/" ends in one)
  std::memcpy(out + at, name.data(), name.size());
  at += name.size();
  if (slash) out[at++] = '/';
  out[at] = 0;
  return true;
}

}  // namespace fanstore::runtime
