#include "bin/private_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "bin/cli_util.h"

namespace fanstore::fanrun {
namespace {

namespace fs = std::filesystem;

constexpr const char* kShm = "/dev/shm";

std::string Octal(mode_t m) {
  char b[8];
  std::snprintf(b, sizeof b, "%04o", static_cast<unsigned>(m & 07777));
  return b;
}

// Why `st` (of a directory entry not followed) is not a private directory of ours, or "".
std::string WhyNotPrivate(const struct stat& st) {
  if (S_ISLNK(st.st_mode)) return "a symbolic link";
  if (!S_ISDIR(st.st_mode)) return "not a directory";
  if (st.st_uid != ::geteuid())
    return "owned by uid " + std::to_string(st.st_uid) + ", not by you (uid " +
           std::to_string(::geteuid()) + ")";
  if (st.st_mode & 022) return "mode " + Octal(st.st_mode) + ": others can write to it";
  return "";
}

}  // namespace

std::string JobsBaseName() {
  return std::string(kShm) + "/fanstore-" + std::to_string(::getuid());
}

Result<DirId> CheckPrivateDir(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (fd < 0) {
    const int e = errno;
    // (ELOOP or ENOTDIR: say what is there instead)
    if (::lstat(path.c_str(), &st) == 0) {
      if (std::string why = WhyNotPrivate(st); !why.empty())
        return Status::Error(path + ": " + why);
    }
    return Status::FromErrno(path, e);
  }
  const int rc = ::fstat(fd, &st);
  const int e = errno;
  ::close(fd);
  if (rc != 0) return Status::FromErrno(path, e);
  if (std::string why = WhyNotPrivate(st); !why.empty()) return Status::Error(path + ": " + why);
  return DirId{st.st_dev, st.st_ino};
}

Result<DirId> MakePrivateDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) return Status::FromErrno(path, errno);
  return CheckPrivateDir(path);
}

Result<std::string> MakeFreshPrivateDir(const std::string& prefix) {
  std::string name = prefix + "XXXXXX";
  if (!::mkdtemp(name.data())) return Status::FromErrno(prefix + "XXXXXX", errno);
  auto id = CheckPrivateDir(name);  // (mkdtemp makes it 0700 for us: checked all the same)
  if (!id.ok()) return id.status();
  return name;
}

bool RemoveIfSame(const std::string& path, DirId id) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
      DirId{st.st_dev, st.st_ino} != id || st.st_uid != ::geteuid())
    return false;
  std::error_code ec;
  fs::remove_all(path, ec);  // (links inside are removed, never followed)
  return !ec;
}

std::string FormatDirId(DirId id) {
  return std::to_string(static_cast<unsigned long long>(id.dev)) + ":" +
         std::to_string(static_cast<unsigned long long>(id.ino));
}

bool ParseDirId(const std::string& s, DirId* id) {
  unsigned long long dev = 0, ino = 0;
  char tail = 0;
  if (std::sscanf(s.c_str(), "%llu:%llu%c", &dev, &ino, &tail) != 2) return false;
  *id = DirId{static_cast<dev_t>(dev), static_cast<ino_t>(ino)};
  return true;
}

Result<std::string> JobsBaseForNewJob() {
  const std::string base = JobsBaseName();
  auto id = MakePrivateDir(base);
  if (id.ok()) return base;
  auto fresh = MakeFreshPrivateDir(base + "-");
  if (!fresh.ok())
    return Status::Error(id.status().message() + "; and " + fresh.status().message());
  cli::Error("fanrun", "warning: " + id.status().message() +
                           ": not used (another user may have made it); this job keeps its "
                           "files in " +
                           *fresh);
  return fresh;
}

std::vector<std::string> TrustedJobsBases() {
  std::vector<std::string> bases;
  const std::string base = JobsBaseName();
  if (CheckPrivateDir(base).ok()) bases.push_back(base);
  const std::string prefix = "fanstore-" + std::to_string(::getuid()) + "-";
  if (DIR* d = ::opendir(kShm)) {
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      const std::string path = std::string(kShm) + "/" + name;
      if (name.size() == prefix.size() + 6 && name.compare(0, prefix.size(), prefix) == 0 &&
          CheckPrivateDir(path).ok())
        bases.push_back(path);
    }
    ::closedir(d);
  }
  return bases;
}

}  // namespace fanstore::fanrun
