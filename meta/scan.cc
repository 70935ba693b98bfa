#include "meta/scan.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>

#include "meta/format.h"

namespace fanstore::meta {
namespace {

Member FromStat(std::string path, const struct stat& st) {
  Member m;
  m.path = std::move(path);
  m.mode = st.st_mode;
  m.uid = st.st_uid;
  m.gid = st.st_gid;
  m.size = static_cast<uint64_t>(st.st_size);
  m.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  if (S_ISDIR(st.st_mode))
    m.kind = Kind::kDir;
  else if (S_ISLNK(st.st_mode))
    m.kind = Kind::kSymlink;
  else
    m.kind = Kind::kFile;
  return m;
}

struct Walker {
  const std::string& root;
  const std::function<void(const std::string&)>& warn;
  ScanResult out;

  std::string Show(const std::string& rel) const { return rel.empty() ? root : root + "/" + rel; }

  Status Walk(int dfd, const std::string& rel) {
    DIR* d = ::fdopendir(dfd);
    if (!d) {
      const int e = errno;
      ::close(dfd);
      return Status::FromErrno(Show(rel), e);
    }
    std::vector<std::string> names;
    errno = 0;
    while (dirent* de = ::readdir(d)) {
      const std::string n = de->d_name;
      if (n != "." && n != "..") names.push_back(n);
      errno = 0;
    }
    if (errno != 0) {
      const int e = errno;
      ::closedir(d);
      return Status::FromErrno(Show(rel), e);
    }
    std::sort(names.begin(), names.end());
    Status result;
    for (const std::string& n : names) {
      const std::string child = rel.empty() ? n : rel + "/" + n;
      if (child.size() > kMaxPathBytes) {
        result = Status::Error(ShownPath(Show(child)) + ": path longer than " +
                               std::to_string(kMaxPathBytes) +
                               " bytes inside the dataset (the format's limit)");
        break;
      }
      struct stat st;
      if (::fstatat(::dirfd(d), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        result = Status::FromErrno(Show(child), errno);
        break;
      }
      if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode)) {
        warn(Show(child) + ": skipped (not a regular file, directory or symlink)");
        ++out.skipped;
        continue;
      }
      Member m = FromStat(child, st);
      if (m.kind == Kind::kSymlink) {
        std::string target(static_cast<size_t>(st.st_size) + 1, '\0');
        const ssize_t n_read = ::readlinkat(::dirfd(d), n.c_str(), target.data(), target.size());
        if (n_read < 0) {
          result = Status::FromErrno(Show(child), errno);
          break;
        }
        target.resize(static_cast<size_t>(n_read));
        m.target = target;
        m.size = target.size();
      }
      const bool is_dir = m.kind == Kind::kDir;
      out.members.push_back(std::move(m));
      if (is_dir) {
        const int cfd =
            ::openat(::dirfd(d), n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (cfd < 0) {
          result = Status::FromErrno(Show(child), errno);
          break;
        }
        result = Walk(cfd, child);
        if (!result.ok()) break;
      }
    }
    ::closedir(d);
    return result;
  }
};

}  // namespace

Result<ScanResult> ScanTree(const std::string& root,
                            const std::function<void(const std::string&)>& warn) {
  const int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(root, errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return Status::FromErrno(root, e);
  }
  Walker w{root, warn, {}};
  w.out.members.push_back(FromStat("", st));
  FANSTORE_RETURN_IF_ERROR(w.Walk(fd, ""));
  std::sort(w.out.members.begin(), w.out.members.end(),
            [](const Member& a, const Member& b) { return a.path < b.path; });
  return std::move(w.out);
}

int OpenRelative(int dirfd, const std::string& rel, int flags) {
  if (rel.size() < PATH_MAX - 1) {
    const int fd = ::openat(dirfd, rel.c_str(), flags | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
  }
  // Too long for one call: descend through the directories, then open the last component.
  const size_t last = rel.rfind('/');
  int cur = ::dup(dirfd);
  if (cur < 0) return -errno;
  size_t start = 0;
  while (start < last) {
    size_t slash = rel.find('/', start);
    const std::string comp = rel.substr(start, slash - start);
    const int next = ::openat(cur, comp.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    const int e = errno;
    ::close(cur);
    if (next < 0) return -e;
    cur = next;
    start = slash + 1;
  }
  const int fd = ::openat(cur, rel.c_str() + last + 1, flags | O_CLOEXEC);
  const int e = errno;
  ::close(cur);
  return fd < 0 ? -e : fd;
}

}  // namespace fanstore::meta
