// Internal to path resolution (resolve.cc, dot_dot.cc) and the virtual cwd (cwd.cc): the
// walk over the image that they use, and the cwd state that resolution reads.
// Thread-safety: as runtime/paths/resolve.h.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "meta/namespace_image.h"
#include "runtime/paths/resolved.h"
#include "runtime/process/prefilter_state.h"
#include "runtime/process/state.h"

namespace fanstore::runtime::resolve_parts {

inline constexpr int kMaxHops = 40;

// (cwd.cc)
// The current directory: an entry when it is inside the dataset; kCwdUnknown after a
// native chdir (recomputed on the next relative path); kCwdAbove when it is a native
// directory above the mount point, kCwdBeside when it is one elsewhere. g_cwd_to_mount then
// holds the way to each spelling of the mount point: "data/imagenet" for cwd /scratch and
// mount /scratch/data/imagenet, "../data/imagenet" for cwd /scratch/code, so that a
// script's relative dataset paths reach the dataset. kCwdNative: no way (unused since the
// way through ".." exists from anywhere, kept for a cwd getcwd cannot name).
inline constexpr int64_t kCwdUnknown = -2, kCwdNative = -1, kCwdAbove = -3, kCwdBeside = -4;
extern std::atomic<int64_t> g_cwd;
// Interned (Way): each distinct way is allocated once and never freed, since a reader may
// hold the one it loaded; a program moving between directories reuses them.
extern std::atomic<const std::string*> g_cwd_to_mount[kSpellings];  // State::spellings()
// With kCwdAbove or kCwdBeside: the cwd as getcwd spells it (physical), interned like the
// ways, so that a relative path with a ".." is taken as the absolute one it names.
extern std::atomic<const std::string*> g_cwd_physical;

// (resolve.cc)
inline bool IsDir(const meta::ImageEntry& e) {
  return e.kind == static_cast<uint8_t>(meta::Kind::kDir);
}

// Whether `path` is under a spelling of the mount point: then *rest is what follows it and
// *start the directory that spelling names.
bool UnderMount(const State& s, std::string_view path, std::string_view* rest, uint32_t* start);

// Walks `rest` from entry `start`. `follow` applies to the last component.
// The walk itself, allocating nothing (a vfork child's chdir uses it too): what is left
// to walk is a stack of path remainders, the path itself at the bottom and each symlink
// target taken on top of the remainder it interrupted. Every remainder is a view of the
// caller's path or of the image, so no target is copied.
struct WalkResult {
  Resolved::Kind kind = Resolved::kVirtual;
  uint32_t entry = 0;
  int err = 0;
  // kRewritten: the path leaves the dataset. It goes on natively from `head`, with the
  // remainders joined innermost first (rest[count - 1] first, rest[0] last).
  std::string_view head;
  std::string_view rest[kMaxHops + 1];
  int count = 0;
  bool trailing_slash = false;
};
WalkResult WalkCore(const State& s, uint32_t start, std::string_view path, bool follow);

// The walk, going on where a path leaves the dataset and comes back; `depth` counts the
// returns so far.
Resolved Walk(const State& s, uint32_t start, std::string_view rest, bool follow, int depth = 0);

// Full resolution from `start` (an entry) along `rest`: one probe of the table first
// (runtime/names/fast_key.h), the walk where that cannot decide.
Resolved WalkFrom(const State& s, uint32_t start, std::string_view rest, bool follow,
                  int depth = 0);

// Any spelling of the mount point: as given, with its symlinks resolved (what getcwd and
// realpath return when a parent directory is a symlink), or through a symlink to it. The
// index in State::spellings() of the one `path` is under, with *rest what follows it; -1
// if none.
int SpellingOf(const State& s, std::string_view path, std::string_view* rest);
// The directory spelling k names: the root, or an alias's directory inside the dataset.
uint32_t SpellingStart(const State& s, size_t k);
// Whether a path that reached the mount point through spelling k, with `rest` after it,
// names the alias's symlink itself, not followed (lstat("data") for data -> the mount
// point): that is the kernel's, a symlink.
bool AliasLinkItself(const State& s, size_t k, std::string_view rest, bool follow);

// (dot_dot.cc)
// A path with a ".." after a native name, relative to native directory `dirfd` (or
// absolute), resolved through the kernel's name for the part before the "..": into the
// dataset when it comes back to a spelling of the mount point; Resolved{} (the kernel's)
// otherwise. Allocates nothing.
Resolved ThroughDotDot(const State& s, int dirfd, std::string_view path, bool follow,
                       int depth = 0);
// The same for relative path `p` from native directory `dir` (absolute and physical).
Resolved ThroughDotDotFrom(const State& s, std::string_view dir, std::string_view p, bool follow);

// The native path a kRewritten walk names, given piece by piece to `put`.
template <class Put>
void JoinRewritten(const WalkResult& w, Put put) {
  put(w.head);
  bool slash = !w.head.empty() && w.head.back() == '/';
  for (int i = w.count - 1; i >= 0; --i) {
    std::string_view r = w.rest[i];
    while (!r.empty() && r.front() == '/') r.remove_prefix(1);
    if (r.empty()) continue;
    if (!slash) put("/");
    put(r);
    slash = r.back() == '/';
  }
  if (w.trailing_slash && !slash) put("/");
}

}  // namespace fanstore::runtime::resolve_parts
