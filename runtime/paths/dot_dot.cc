// A path with ".." after a native name: the kernel names the directory before the "..",
// and the path goes on from there, into the dataset when it comes back to the mount point
// (docs/design.md: glossary, "head"). The directories asked of the kernel are remembered by
// their absolute spelling for the process's life.
// Thread-safety: any thread; allocates nothing (a vfork child may call it).
#include <fcntl.h>

#include <cstring>
#include <string_view>

#include "runtime/names/kernel_names.h"
#include "runtime/names/mount_ways.h"
#include "runtime/names/path_pair.h"
#include "runtime/paths/resolve_parts.h"
#include "runtime/process/state.h"

namespace fanstore::runtime::resolve_parts {

// The kernel's physical names of directories spelled with a "..", by their absolute
// spelling ("/repo/code/.." -> "/repo"), remembered for the process's life: a DataLoader
// opens every sample as root + "/class/file" with the root's ".." in it, and asking the
// kernel each time cost 3 system calls per file (130 k -> 75 k files/s). A link changed
// during the job under such a spelling is not seen.
namespace {

PathPair<256, 1024> g_heads[16];

// The remembered directory of `head` written to out[0, room), its length; -1 if none.
long RememberedDir(std::string_view head, char* out, size_t room) {
  for (const auto& h : g_heads) {
    if (h.Free()) return -1;  // (slots are taken in order)
    if (h.Published() && h.Key() == head && h.value_len < room) {
      std::memcpy(out, h.value, h.value_len);
      return h.value_len;
    }
  }
  return -1;
}

void RememberDir(std::string_view head, std::string_view dir) {
  for (auto& h : g_heads)
    if (h.TryFill(head, dir) || !PathPair<256, 1024>::Fits(head, dir)) return;
}

}  // namespace

// A path with a ".." after a native name, relative to native directory `dirfd` (or
// absolute): the kernel resolves the part up to the first ".." (physically, as it would the
// whole path), and the path goes on from the directory it names: into the dataset when that
// is a spelling of the mount point ("/repo/code/../data/imagenet/x"), round again for a
// later "..". Only paths with one of the mount point's names after the ".." are taken
// (DotDotBeforeName); a native answer (Resolved{}) leaves the call to the kernel as it was.
// Allocates nothing.
Resolved ThroughDotDot(const State& s, int dirfd, std::string_view path, bool follow, int depth) {
  const auto spellings = s.spellings();
  auto is_name = [&](std::string_view c) {
    for (size_t k = 0; k < spellings.size(); ++k)
      if (IsComponentOf(c, spellings[k])) return true;
    return false;
  };
  // One buffer (this nests with Walk on the hook's 256 KiB stack, up to kMaxReturns deep):
  // the path, with its tail kept at the buffer's end while its head, cut off by a NUL for
  // the kernel, is replaced by the directory it names.
  char b[4096];
  for (int hop = 0; hop < kMaxHops; ++hop) {
    const size_t head = DotDotBeforeName(path, is_name);
    if (head == 0 || path.size() >= sizeof b) return Resolved{};
    const size_t tail = path.size() - head;
    std::memmove(b, path.data(), path.size());  // (a no-op after the first round)
    char* const kept = b + sizeof b - tail;     // (past b[head]: path.size() < sizeof b)
    std::memmove(kept, b + head, tail);
    b[head] = 0;
    const bool absolute = b[0] == '/';
    long n = absolute ? RememberedDir(std::string_view(b, head), b, sizeof b - tail) : -1;
    if (n < 0) {
      char key[sizeof g_heads[0].key];
      const size_t key_len = absolute && head <= sizeof key ? head : 0;
      std::memcpy(key, b, key_len);
      n = DirName(dirfd, b, b, sizeof b - tail);  // (b, the head, is read before it is written)
      if (n < 0) return Resolved{};
      if (key_len > 0)
        RememberDir(std::string_view(key, key_len), std::string_view(b, static_cast<size_t>(n)));
    }
    std::memmove(b + n, kept, tail);
    path = std::string_view(b, static_cast<size_t>(n) + tail);
    dirfd = AT_FDCWD;
    std::string_view rest;
    if (const int k = SpellingOf(s, path, &rest); k >= 0) {
      if (AliasLinkItself(s, static_cast<size_t>(k), rest, follow)) return Resolved{};
      return WalkFrom(s, SpellingStart(s, static_cast<size_t>(k)), rest, follow, depth);
    }
  }
  return Resolved{};
}

// A relative path from native directory `dir` (absolute and physical: getcwd's, or a
// directory fd's /proc link) through ThroughDotDot as the absolute path it names, whose
// heads are then remembered (a relative head is asked of the kernel every time).
Resolved ThroughDotDotFrom(const State& s, std::string_view dir, std::string_view p, bool follow) {
  char joined[4096];
  if (dir.size() + 1 + p.size() >= sizeof joined) return Resolved{};
  std::memcpy(joined, dir.data(), dir.size());
  joined[dir.size()] = '/';
  std::memcpy(joined + dir.size() + 1, p.data(), p.size());
  return ThroughDotDot(s, AT_FDCWD, std::string_view(joined, dir.size() + 1 + p.size()), follow);
}

}  // namespace fanstore::runtime::resolve_parts
