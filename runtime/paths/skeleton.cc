#include "runtime/paths/skeleton.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include "base/raw_syscall.h"
#include "meta/member.h"
#include "runtime/names/kernel_names.h"
#include "runtime/process/prefilter_state.h"
#include "runtime/process/state.h"

namespace fanstore::runtime {
namespace {

using base::RawSyscall6;

// Whether physical path p is the mount point or under it.
bool AtOrUnder(std::string_view p, std::string_view m) {
  return m == "/" || p == m ||
         (p.size() > m.size() && p.substr(0, m.size()) == m && p[m.size()] == '/');
}

// `n` (a kernel name's length in out, or -1) when that name is the mount point or under
// it, NUL-terminated there; 0 otherwise.
size_t UnderMount(const State& s, long n, char* out) {
  if (n < 0 || !AtOrUnder(std::string_view(out, static_cast<size_t>(n)), s.physical_mount()))
    return 0;
  out[n] = 0;
  return static_cast<size_t>(n);
}

bool OnSkeletonDevice(const struct stat& st) {
  return IsSkeletonDir(st, g_prefilter.skeleton_dev, g_prefilter.skeleton_marked);
}

// Whether `p` is absolute and clean: no empty, "." or ".." component, no trailing '/'
// (then its prefixes are directories the kernel resolves the same way).
bool Clean(std::string_view p) {
  return p.size() >= 2 && meta::IsCleanAbsolute(p);
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
  std::string_view key = spelled, value = physical;
  char name[4096], where[4096];
  for (size_t c = cuts; c-- > 0;) {                  // the shortest first
    std::memcpy(name, spelled.data(), cut_from[c]);  // (shorter than spelled, < 4096)
    name[cut_from[c]] = 0;
    const long n = DirName(AT_FDCWD, name, where, sizeof where);
    if (n > 0 && std::string_view(where, static_cast<size_t>(n)) == physical.substr(0, cut_to[c])) {
      key = spelled.substr(0, cut_from[c]);
      value = physical.substr(0, cut_to[c]);
      break;
    }
  }
  for (auto& l : g_prefilter.learned) {
    if (l.Published() && l.Key() == key) return;  // (another thread was first)
    if (l.TryFill(key, value)) {
      g_prefilter.learned_count.fetch_add(1, std::memory_order_release);
      return;
    }
    if (!l.Fits(key, value)) return;
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
  for (const auto& l : g_prefilter.learned) {
    if (!l.Published()) continue;
    const std::string_view from = l.Key(), to = l.Value();
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
    const size_t n = UnderMount(*s, FdName(static_cast<int>(k), out, room), out);
    if (n == 0) return false;
    std::string_view spelled(reinterpret_cast<const char*>(a[pa]));
    while (spelled.size() > 1 && spelled.back() == '/') spelled.remove_suffix(1);
    char absolute[4096];
    if (Absolute(pa == 1 ? static_cast<int>(a[0]) : AT_FDCWD, spelled, absolute, sizeof absolute))
      Learn(*s, absolute, std::string_view(out, n));
    return true;
  }
  if (k == -EACCES) {  // one of the skeleton's directories itself, opened (they are 0111)
    const char* self = reinterpret_cast<const char*>(a[pa]);
    const int fd_at = pa == 1 ? static_cast<int>(a[0]) : AT_FDCWD;
    if (RawSyscall6(SYS_newfstatat, fd_at, reinterpret_cast<long>(self),
                    reinterpret_cast<long>(&st), 0) == 0 &&
        OnSkeletonDevice(st)) {
      const size_t n = UnderMount(*s, DirName(fd_at, self, out, room), out);
      if (n == 0) return false;
      std::string_view spelled(self);
      while (spelled.size() > 1 && spelled.back() == '/') spelled.remove_suffix(1);
      char absolute[4096];
      if (Absolute(fd_at, spelled, absolute, sizeof absolute))
        Learn(*s, absolute, std::string_view(out, n));
      return true;
    }
  }
  // ENOENT, or EACCES for a name created in a skeleton directory (they are not writable).
  if (k != -ENOENT && k != -EACCES) return false;
  // ENOENT: is the parent directory one of the skeleton's? (The kernel read the path, so
  // it is readable.)
  const char* path = reinterpret_cast<const char*>(a[pa]);
  const int dirfd = pa == 1 ? static_cast<int>(a[0]) : AT_FDCWD;
  char parent[4096];
  LastComponent c;
  if (!ParentOf(path, parent, &c)) return false;
  const std::string_view name(path + c.start, c.end - c.start);
  const size_t len = c.len, end = c.end;
  if (RawSyscall6(SYS_newfstatat, dirfd, reinterpret_cast<long>(parent),
                  reinterpret_cast<long>(&st), 0) != 0 ||
      !OnSkeletonDevice(st))
    return false;  // (one system call for an ENOENT elsewhere: Python's imports make many)
  const bool slash = len > end;  // a trailing slash is kept: directories only
  const size_t tail = 1 + name.size() + slash;
  const size_t n =
      room > tail + 1 ? UnderMount(*s, DirName(dirfd, parent, out, room - tail), out) : 0;
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
