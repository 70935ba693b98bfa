// The mount point and the dataset's directories fanrun makes under it (its skeleton).
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <filesystem>
#include <functional>
#include <map>
#include <system_error>
#include <thread>
#include <unordered_set>
#include <vector>

#include "bin/fanrun_node_parts.h"
#include "runtime/paths/skeleton.h"

namespace fanstore::fanrun {

namespace fs = std::filesystem;

// Creates, below the mount point, the dataset's directories that do not exist natively
// (so a chdir into the dataset leaves a kernel cwd that children inherit). Returns what
// was created, to be removed at exit, deepest first.
std::vector<std::string> MakeSkeleton(const meta::NamespaceView& ns, const std::string& mount) {
  std::vector<std::string> made;
  std::error_code ec;
  std::vector<std::string> parents;
  for (fs::path p = mount; !p.empty() && !fs::exists(p, ec); p = p.parent_path())
    parents.push_back(p.string());
  std::vector<std::pair<std::string, int64_t>> marks;  // made at or below the mount point
  for (auto it = parents.rbegin(); it != parents.rend(); ++it) {
    if (::mkdir(it->c_str(), 0755) == 0) {
      made.push_back(*it);
      if (*it == mount) marks.emplace_back(*it, ns.entry(0).mtime_ns);
    } else if (errno != EEXIST) {
      // The dataset is served all the same, and the runtime passes a working directory
      // inside it across exec (runtime/calls/inherit.h); a program without the runtime finds no
      // such directory as its working directory.
      spdlog::warn(
          "cannot create the mount point's directory {} ({}): served all the same; "
          "a program without the runtime (a static binary) started inside the "
          "dataset will not find its working directory",
          *it, std::strerror(errno));
      return made;
    }
  }
  // Parents before children: a walk down from the root.
  std::vector<uint32_t> todo = {0};
  while (!todo.empty()) {
    const meta::ImageEntry& dir = ns.entry(todo.back());
    todo.pop_back();
    for (uint32_t c = 0; c < dir.child_count; ++c) {
      const uint32_t i = ns.Child(dir, c);
      const meta::ImageEntry& e = ns.entry(i);
      if (e.kind != static_cast<uint8_t>(meta::Kind::kDir)) continue;
      const std::string p = mount + "/" + std::string(ns.path(e));
      if (::mkdir(p.c_str(), 0755) == 0) {
        made.push_back(p);
        marks.emplace_back(p, e.mtime_ns);
      }
      todo.push_back(i);
    }
  }
  // The mark (runtime/paths/skeleton.h), once every directory is made (a mkdir below one changes
  // its mtime): the dataset directory's second, kSkeletonMarkNs nanoseconds.
  for (const auto& [p, mtime_ns] : marks) {
    const timespec times[2] = {
        {0, UTIME_OMIT}, {static_cast<time_t>(mtime_ns / 1'000'000'000), runtime::kSkeletonMarkNs}};
    ::utimensat(AT_FDCWD, p.c_str(), times, 0);
  }
  // Search only (0111): a program that reaches a skeleton directory through a link the
  // runtime was not told of gets the kernel's EACCES, which the runtime answers from the
  // dataset (a listing; EROFS for a file created there), instead of creating files there,
  // invisible through the mount and left behind, or listing directories without their
  // files. So a successful native directory open needs no check (runtime/calls/prefilter.cc).
  // Root is not stopped by mode bits (docs/design.md). (The mount point's missing parents,
  // made too, are not the dataset's: they stay 0755.)
  for (const std::string& p : made)
    if (p.size() >= mount.size() && p.compare(0, mount.size(), mount) == 0)
      ::chmod(p.c_str(), 0111);
  return made;
}

// Removes the skeleton directories this rank made, deepest first. They are read-only
// (0111), and removing one needs write permission on its parent only: each parent is made
// writable again once, before its children go (three chmods for an ImageNet-like tree,
// not one per directory: each is a journaled change), when it is this rank's or another
// rank's skeleton directory on this host (ranks share a mount point; the parent still
// carries the skeleton mark, runtime/paths/skeleton.h, and nothing else under the mount
// point is touched). The children of different parents go in parallel: an rmdir on ext4
// mounted `discard` waits for the device to discard the directory's block, ~0.1 ms, under
// its parent's lock (200 directories: 21-24 ms one by one, 12-14 ms by 4 threads in 4
// parents, no faster in one).
void RemoveSkeleton(const std::vector<std::string>& made, const std::string& mount) {
  const std::unordered_set<std::string> ours(made.begin(), made.end());
  // depth -> parent -> its children made by this rank
  std::map<size_t, std::map<std::string, std::vector<std::string>>, std::greater<>> levels;
  for (const std::string& p : made)
    levels[static_cast<size_t>(std::count(p.begin(), p.end(), '/'))]
          [fs::path(p).parent_path().string()]
              .push_back(p);
  for (auto& [depth, parents] : levels) {
    std::vector<const std::vector<std::string>*> groups;
    for (auto& [parent, children] : parents) {
      struct stat st;
      if (ours.count(parent) != 0 ||
          (parent.size() >= mount.size() && parent.compare(0, mount.size(), mount) == 0 &&
           ::lstat(parent.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::geteuid() &&
           st.st_mtim.tv_nsec == runtime::kSkeletonMarkNs && !(st.st_mode & S_IWUSR)))
        ::chmod(parent.c_str(), 0700);
      groups.push_back(&children);
    }
    std::atomic<size_t> next{0};
    auto remove = [&] {
      for (size_t g; (g = next.fetch_add(1)) < groups.size();)
        for (const std::string& dir : *groups[g]) ::rmdir(dir.c_str());
    };
    std::vector<std::thread> helpers;
    try {
      for (size_t i = 1; i < std::min<size_t>(groups.size(), 4); ++i) helpers.emplace_back(remove);
    } catch (const std::system_error&) {  // (no thread to be had: this one removes them all)
    }
    remove();
    for (std::thread& t : helpers) t.join();
  }
}

// A mount point can be a directory (shadowed while the job runs) or nothing yet (made, with
// its missing parents), not a file: the dataset's root would be a directory where the
// kernel and every child process see a file.
Status CheckMountPoint(const std::string& mount) {
  struct stat st;
  if (::stat(mount.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return Status::Ok();
    return Status::Error("--mount " + mount + ": exists and is not a directory");
  }
  if (errno == ENOTDIR)
    return Status::Error("--mount " + mount + ": a component of the path is not a directory");
  return Status::Ok();
}

}  // namespace fanstore::fanrun
