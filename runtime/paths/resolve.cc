#include "runtime/paths/resolve.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "base/raw_syscall.h"
#include "meta/format.h"
#include "runtime/names/kernel_names.h"
#include "runtime/names/mount_ways.h"
#include "runtime/paths/resolve_parts.h"
#include "runtime/process/fd_table.h"
#include "runtime/process/permission.h"
#include "runtime/process/prefilter_state.h"
#include "runtime/process/state.h"

namespace fanstore::runtime::resolve_parts {

using meta::ImageEntry;
using meta::Kind;

// The child of `dir` named `name` (binary search: children are in name order).
uint32_t Child(const State& s, uint32_t dir, std::string_view name) {
  const ImageEntry& d = s.ns.entry(dir);
  uint32_t lo = 0, hi = d.child_count;
  while (lo < hi) {
    const uint32_t mid = (lo + hi) / 2;
    const uint32_t c = s.ns.Child(d, mid);
    const int cmp = s.ns.name(s.ns.entry(c)).compare(name);
    if (cmp == 0) return c;
    if (cmp < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return meta::kNoEntry;
}

// If `path` is the mount point or below it, the part after it (no leading '/').
bool UnderOne(std::string_view mount, std::string_view path, std::string_view* rest) {
  if (path.size() < mount.size() || path.compare(0, mount.size(), mount) != 0) return false;
  if (path.size() > mount.size() && path[mount.size()] != '/' && mount != "/") return false;
  *rest = path.substr(mount.size());
  return true;
}

int SpellingOf(const State& s, std::string_view path, std::string_view* rest) {
  const auto spellings = s.spellings();
  for (size_t k = 0; k < spellings.size(); ++k)
    if (UnderOne(spellings[k], path, rest)) return static_cast<int>(k);
  return -1;
}

bool AliasLinkItself(const State& s, size_t k, std::string_view rest, bool follow) {
  const size_t first_alias = s.spellings().first_alias;
  return !follow && rest.empty() && k >= first_alias && (s.alias_links >> (k - first_alias) & 1);
}

uint32_t SpellingStart(const State& s, size_t k) {
  const size_t first_alias = s.spellings().first_alias;
  return k >= first_alias ? s.alias_entries[k - first_alias] : 0;
}

// Whether `path` is under a spelling of the mount point: then *rest is what follows it and
// *start the entry it is taken from.
bool UnderMount(const State& s, std::string_view path, std::string_view* rest, uint32_t* start) {
  const int k = SpellingOf(s, path, rest);
  if (k >= 0) *start = SpellingStart(s, static_cast<size_t>(k));
  return k >= 0;
}

Resolved Error(int e) {
  Resolved r;
  r.kind = Resolved::kError;
  r.err = e;
  return r;
}

WalkResult WalkCore(const State& s, uint32_t start, std::string_view path, bool follow) {
  WalkResult w;
  std::string_view* const stack = w.rest;
  int depth = 1;
  stack[0] = path;
  w.trailing_slash = !path.empty() && path.back() == '/';
  auto pending = [&] {  // drops finished remainders; false when nothing is left
    while (depth > 0 && stack[depth - 1].find_first_not_of('/') == std::string_view::npos) --depth;
    return depth > 0;
  };
  auto leave = [&](std::string_view head) {
    w.kind = Resolved::kRewritten;
    w.head = head;
    w.count = depth;
    return w;
  };
  auto error = [&](int e) {
    w.kind = Resolved::kError;
    w.err = e;
    return w;
  };
  uint32_t cur = start;
  int hops = 0;
  Caller caller;
  while (pending()) {
    const std::string_view c = NextComponent(&stack[depth - 1]);
    const ImageEntry& ce = s.ns.entry(cur);
    if (!IsDir(ce)) return error(ENOTDIR);
    // The kernel looks a name up only in a directory the caller may search, ".." too.
    if (!caller.May(ce, meta::kMayExec)) return error(EACCES);
    if (c == ".") continue;
    if (c == "..") {
      if (cur == 0) {
        // Leaving the dataset: the rest is native, below the mount point's parent (the
        // kernel takes ".." of the real directory: its physical parent).
        const std::string_view m = s.physical_mount();
        const size_t slash = m.rfind('/');
        pending();
        return leave(slash == 0 ? std::string_view("/") : m.substr(0, slash));
      }
      cur = ce.parent;
      continue;
    }
    const uint32_t next = Child(s, cur, c);
    if (next == meta::kNoEntry) return error(ENOENT);
    const ImageEntry& ne = s.ns.entry(next);
    const bool last = !pending();
    if (ne.kind == static_cast<uint8_t>(Kind::kSymlink) && (!last || follow || w.trailing_slash)) {
      if (++hops > kMaxHops) return error(ELOOP);
      std::string_view t = s.ns.target(ne);
      if (!t.empty() && t[0] == '/') {
        std::string_view inside;
        if (!UnderMount(s, t, &inside, &cur)) return leave(t);
        t = inside;
      }
      stack[depth++] = t;  // at most kMaxHops + 1 deep: every push is a hop
      continue;
    }
    cur = next;
  }
  if (w.trailing_slash && !IsDir(s.ns.entry(cur))) return error(ENOTDIR);
  w.entry = cur;
  return w;
}

// `depth`: how many times the path has left the dataset so far. A symlink `l -> ../mnt/l`
// would leave and come back for ever (the kernel gives ELOOP there too); each return costs
// a few KiB of the hook's stack (this function and ThroughDotDot's buffer), so the bound is
// well below the kernel's 40 links: no real path leaves a dataset and comes back 8 times.
constexpr int kMaxReturns = 8;
Resolved Walk(const State& s, uint32_t start, std::string_view rest, bool follow, int depth) {
  const WalkResult w = WalkCore(s, start, rest, follow);
  Resolved r;
  r.kind = w.kind;
  r.entry = w.entry;
  r.err = w.err;
  if (w.kind != Resolved::kRewritten) return r;
  JoinRewritten(w, [&](std::string_view p) { r.path += p; });
  // A path that leaves the dataset through ".." and comes back ("train/../../imagenet/val",
  // from a cwd in the dataset) or reaches it through a ".." after a native name: the kernel
  // would find the mount point's skeleton, so the walk goes on here.
  if (++depth > kMaxReturns) return Error(ELOOP);
  std::string_view again;  // (a view of r.path, which lives until the return)
  if (const int k = SpellingOf(s, r.path, &again); k >= 0) {
    if (AliasLinkItself(s, static_cast<size_t>(k), again, follow)) return r;
    return Walk(s, SpellingStart(s, static_cast<size_t>(k)), again, follow, depth);
  }
  Resolved through = ThroughDotDot(s, AT_FDCWD, r.path, follow, depth);
  return through.kind == Resolved::kNative ? r : through;
}

// A path relative to the dataset root that is a key of the table as it is takes one probe
// (runtime/names/fast_key.h); anything else, a final symlink to follow, or a miss (which may go
// through a symlinked directory), takes the full walk.
bool FastLookup(const State& s, std::string_view rest, bool follow, Resolved* out) {
  while (!rest.empty() && rest.front() == '/') rest.remove_prefix(1);
  uint32_t e;
  if (!FastKeyEntry(s.tables(), rest.data(), rest.size(), follow, &e)) return false;
  out->kind = Resolved::kVirtual;
  out->entry = e;
  return true;
}

Resolved WalkFrom(const State& s, uint32_t start, std::string_view rest, bool follow, int depth) {
  Resolved r;
  if (start == 0 && FastLookup(s, rest, follow, &r)) return r;
  return Walk(s, start, rest, follow, depth);
}

}  // namespace fanstore::runtime::resolve_parts

namespace fanstore::runtime {

using namespace resolve_parts;

size_t CwdLinkLength(std::string_view p) {
  for (std::string_view link : {"/proc/self/cwd", "/proc/thread-self/cwd"})
    if (p.substr(0, link.size()) == link) return link.size();
  const State* s = Get();
  if (!s || p.substr(0, 6) != "/proc/") return 0;
  size_t i = 6;
  long pid = 0;
  while (i < p.size() && i < 16 && p[i] >= '0' && p[i] <= '9') pid = pid * 10 + (p[i++] - '0');
  if (i == 6 || pid != s->pid.load(std::memory_order_relaxed) || p.substr(i, 4) != "/cwd") return 0;
  return i + 4;
}

int FdLink(std::string_view p, std::string_view* rest) {
  auto eat = [&](std::string_view prefix) {
    if (p.substr(0, prefix.size()) != prefix) return false;
    p.remove_prefix(prefix.size());
    return true;
  };
  // A run of digits at the front of p, as a number below 2^31; -1 if none.
  auto number = [&]() -> long {
    long v = 0;
    size_t i = 0;
    for (; i < p.size() && p[i] >= '0' && p[i] <= '9' && i < 10; ++i) v = v * 10 + (p[i] - '0');
    if (i == 0 || v > INT32_MAX || (i < p.size() && p[i] >= '0' && p[i] <= '9')) return -1;
    p.remove_prefix(i);
    return v;
  };
  long fd = -1;
  if (eat("/dev/")) {
    if (eat("stdin"))
      fd = 0;
    else if (eat("stdout"))
      fd = 1;
    else if (eat("stderr"))
      fd = 2;
    else if (eat("fd/"))
      fd = number();
  } else if (eat("/proc/")) {
    const State* s = Get();
    bool own = eat("self/") || eat("thread-self/");
    if (!own && s) {
      const long pid = number();
      own = pid > 0 && pid == s->pid.load(std::memory_order_relaxed) && eat("/");
    }
    if (own && eat("fd/")) fd = number();
  }
  if (fd < 0 || (!p.empty() && p[0] != '/') || !Fds().Lookup(static_cast<int>(fd))) return -1;
  *rest = p;
  return static_cast<int>(fd);
}

std::string MountPath(uint32_t entry) {
  const State& s = *Get();
  const std::string_view p = s.ns.path(s.ns.entry(entry));
  const std::string& m = s.physical_mount();
  if (p.empty()) return m;
  return (m == "/" ? "" : m) + "/" + std::string(p);
}

Resolved Resolve(long dirfd_arg, const char* path, int flags) {
  // The kernel takes dirfd as an int; the register's upper half is not part of it.
  const int dirfd = static_cast<int>(dirfd_arg);
  const State* s = Get();
  if (!s || !path) return Resolved{};
  const std::string_view p(path);
  const bool follow = flags & kFollow;
  if (p.empty()) {
    if (!(flags & kEmptyOk)) {
      if (Fds().Lookup(dirfd)) return Error(ENOENT);
      return Resolved{};
    }
    if (OpenFile* f = Fds().Lookup(dirfd)) {
      Resolved r;
      r.kind = Resolved::kVirtual;
      r.entry = f->entry;
      return r;
    }
    return Resolved{};
  }
  if (p[0] == '/') {
    std::string_view rest;
    if (const int k = SpellingOf(*s, p, &rest); k >= 0) {
      if (AliasLinkItself(*s, static_cast<size_t>(k), rest, follow)) return Resolved{};
      return WalkFrom(*s, SpellingStart(*s, static_cast<size_t>(k)), rest, follow);
    }
    // Below the cwd's link in /proc (/proc/self/cwd/x): the kernel would follow it to the
    // skeleton directory, so it is taken as x relative to the cwd. (The link itself is the
    // kernel's: it names the skeleton directory where the cwd is.)
    if (const size_t n = CwdLinkLength(p); n > 0 && (p.size() == n || p[n] == '/')) {
      size_t i = n;
      while (i < p.size() && p[i] == '/') ++i;
      uint32_t cwd;
      if (i < p.size()) return Resolve(AT_FDCWD, path + i, flags);
      if (follow && CwdIsVirtual(&cwd)) {  // the link itself, followed: the cwd
        Resolved r;
        r.kind = Resolved::kVirtual;
        r.entry = cwd;
        return r;
      }
    }
    // A virtual fd's link in /proc or /dev: the kernel would follow it to the placeholder
    // (/dev/null), so it is followed here, to the fd's entry. The link itself (the last
    // component, not followed: lstat, O_NOFOLLOW) is the kernel's.
    const int fd = FdLink(p, &rest);
    if (fd < 0) return ThroughDotDot(*s, AT_FDCWD, p, follow);
    if (rest.empty() && !follow) return Resolved{};
    const uint32_t entry = Fds().Lookup(fd)->entry;
    if (rest.empty()) {
      Resolved r;
      r.kind = Resolved::kVirtual;
      r.entry = entry;
      return r;
    }
    if (!IsDir(s->ns.entry(entry))) return Error(ENOTDIR);
    return Walk(*s, entry, rest, follow);
  }
  if (dirfd == AT_FDCWD) {
    uint32_t cwd;
    if (!CwdIsVirtual(&cwd)) {
      const int64_t c = g_cwd.load(std::memory_order_relaxed);
      std::string_view rest;
      for (size_t k = 0; (c == kCwdAbove || c == kCwdBeside) && k < kSpellings; ++k) {
        const std::string* down = g_cwd_to_mount[k].load();
        if (down && !down->empty() && BelowMountFromAbove(p, *down, &rest)) {
          if (AliasLinkItself(*s, k, rest, follow)) return Resolved{};
          return WalkFrom(*s, SpellingStart(*s, k), rest, follow);
        }
      }
      const std::string* dir = c == kCwdAbove || c == kCwdBeside ? g_cwd_physical.load() : nullptr;
      if (dir) return ThroughDotDotFrom(*s, *dir, p, follow);
      return ThroughDotDot(*s, AT_FDCWD, p, follow);
    }
    if (cwd != 0) {
      // Relative to a directory below the root: prefix its path for the fast probe.
      char buf[1024];
      const std::string_view base = s->ns.path(s->ns.entry(cwd));
      if (base.size() + 1 + p.size() < sizeof buf) {
        std::memcpy(buf, base.data(), base.size());
        buf[base.size()] = '/';
        std::memcpy(buf + base.size() + 1, p.data(), p.size());
        Resolved r;
        if (FastLookup(*s, std::string_view(buf, base.size() + 1 + p.size()), follow, &r)) return r;
      }
    }
    return WalkFrom(*s, cwd, p, follow);
  }
  if (OpenFile* f = Fds().Lookup(dirfd)) {
    if (!IsDir(s->ns.entry(f->entry))) return Error(ENOTDIR);
    return Walk(*s, f->entry, p, follow);
  }
  // A native directory fd above the mount point (find and du walk by fds: openat(fd of
  // /scratch/data, "imagenet")): where the kernel says it is, then the way down, as from a
  // cwd above the mount point; or a path with a ".." after a native name, from there. (The
  // prefilter sends only paths whose first component is one of the mount point's names,
  // or with one of them after a "..".)
  if (dirfd < 0) return Resolved{};
  char dir[4096];
  const long n = FdName(dirfd, dir, sizeof dir);
  if (n < 0) return Resolved{};
  std::string_view rest;
  const auto spellings = s->spellings();
  for (size_t k = 0; k < spellings.size(); ++k) {
    std::string_view down;
    if (DownFromAbove(std::string_view(dir, static_cast<size_t>(n)), spellings[k], &down) &&
        BelowMountFromAbove(p, down, &rest)) {
      if (AliasLinkItself(*s, k, rest, follow)) return Resolved{};
      return WalkFrom(*s, SpellingStart(*s, k), rest, follow);
    }
  }
  return ThroughDotDotFrom(*s, std::string_view(dir, static_cast<size_t>(n)), p, follow);
}

}  // namespace fanstore::runtime
