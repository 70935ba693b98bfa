// The ways from a native directory to the mount point, as strings: down from a directory
// above it, up and down from one beside it, and whether a relative path follows such a
// way (runtime/paths/resolve.cc). Pure functions of their arguments, no system call.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace fanstore::runtime {

// The next component of *p (leading slashes skipped), taken off it; "" when none is left.
inline std::string_view NextComponent(std::string_view* p) {
  while (!p->empty() && p->front() == '/') p->remove_prefix(1);
  const size_t slash = p->find('/');
  const std::string_view c = p->substr(0, slash);
  p->remove_prefix(c.size());
  return c;
}

// If directory `dir` (absolute, as the kernel spells it) is above `mount` ("/" or a
// proper prefix of it ending at a '/'), the way down from it: "data/imagenet" for /scratch
// and /scratch/data/imagenet.
inline bool DownFromAbove(std::string_view dir, std::string_view mount, std::string_view* down) {
  if (mount.empty() || dir.empty() || dir.size() >= mount.size() ||
      mount.compare(0, dir.size(), dir) != 0 || (dir != "/" && mount[dir.size()] != '/'))
    return false;
  *down = mount.substr(dir == "/" ? 1 : dir.size() + 1);
  return true;
}

// From directory `dir` (absolute, physical: getcwd's) that is neither above `mount` nor
// below it, the way to it that goes up first: "../data/imagenet" from /repo/code for
// /repo/data/imagenet. Lexical, and right: ".." of a physical path is its parent. "" when
// there is none (dir is below the mount point or either path is not absolute).
inline std::string WayUpAndDown(std::string_view dir, std::string_view mount) {
  if (dir.empty() || mount.empty() || dir[0] != '/' || mount[0] != '/') return {};
  std::string_view d = dir, m = mount;
  // Drop the common leading components.
  for (;;) {
    std::string_view dd = d, mm = m;
    const std::string_view a = NextComponent(&dd), b = NextComponent(&mm);
    if (a.empty() || a != b) break;
    d = dd;
    m = mm;
  }
  while (!m.empty() && m.front() == '/') m.remove_prefix(1);
  if (m.empty()) return {};
  std::string way;
  for (std::string_view rest = d; !NextComponent(&rest).empty();) way += "../";
  if (way.empty()) return {};  // (above: DownFromAbove's case)
  way += m;
  return way;
}

// From a native cwd above the mount point: the part of `path` below the mount point if it
// goes down the way `down` names ("." and empty components skipped), false otherwise (the
// kernel resolves it: it names a native directory, or takes a ".." or a native symlink,
// which only the kernel can follow).
inline bool BelowMountFromAbove(std::string_view path, std::string_view down,
                                std::string_view* rest) {
  size_t i = 0;
  auto next_component = [&]() {
    for (;;) {
      while (i < path.size() && path[i] == '/') ++i;
      const size_t start = i;
      while (i < path.size() && path[i] != '/') ++i;
      const std::string_view c = path.substr(start, i - start);
      if (c != ".") return c;
    }
  };
  while (!down.empty()) {
    const size_t slash = down.find('/');
    const std::string_view want = down.substr(0, slash);
    down = slash == std::string_view::npos ? std::string_view() : down.substr(slash + 1);
    if (next_component() != want) return false;  // also "" (the path ended above the mount)
  }
  *rest = path.substr(i);
  return true;
}

// Whether `name` is one of the components of path `mount`.
inline bool IsComponentOf(std::string_view name, std::string_view mount) {
  for (std::string_view m = mount;;) {
    const std::string_view c = NextComponent(&m);
    if (c.empty()) return false;
    if (c == name) return true;
  }
}

// A path with a ".." after a native name ("/repo/code/../data/imagenet/x", as
// os.path.join(os.path.dirname(__file__), "..", "data") spells it) may reach the dataset
// once the kernel has resolved its part up to the first ".." (physically: a ".." after a
// symlink is its target's parent; runtime/paths/dot_dot.cc). The length of that part, if a
// component `is_name` accepts (one of the mount point's names) follows the ".."; 0 if none
// does (then the path cannot be spelling the way into the dataset, and stays the kernel's).
template <class IsName>
size_t DotDotBeforeName(std::string_view path, IsName is_name) {
  size_t first = 0;
  for (std::string_view rest = path;;) {
    const std::string_view c = NextComponent(&rest);
    if (c.empty()) return 0;
    if (c == "..") {
      if (first == 0) first = path.size() - rest.size();
    } else if (first != 0 && is_name(c)) {
      return first;
    }
  }
}

}  // namespace fanstore::runtime
