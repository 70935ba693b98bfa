#include "bin/mount_choice.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "meta/member.h"

namespace fanstore::fanrun {
namespace {

// `path` is `dir` or below it (both absolute and normalised).
bool AtOrBelow(std::string_view path, std::string_view dir) {
  if (dir == "/") return true;
  return path.compare(0, dir.size(), dir) == 0 &&
         (path.size() == dir.size() || path[dir.size()] == '/');
}

// The longest existing prefix of `path` (at least "/"), stat'ed into *st.
std::string NearestExisting(const std::string& path, struct stat* st) {
  std::string p = path;
  while (p != "/" && ::stat(p.c_str(), st) != 0) {
    const size_t slash = p.rfind('/');
    p = slash == 0 ? "/" : p.substr(0, slash);
  }
  if (p == "/") ::stat("/", st);
  return p;
}

}  // namespace

std::string SystemPathReason(const std::string& path) {
  for (size_t i = 1; i < path.size();) {
    const size_t j = std::min(path.find('/', i), path.size());
    const std::string_view c = std::string_view(path).substr(i, j - i);
    if (!c.empty() && c[0] == '.') return "a hidden directory";
    if (c == "site-packages" || c == "dist-packages") return "a Python package directory";
    i = j + 1;
  }
  for (std::string_view ok : {"/dev/shm", "/run/user", "/var/tmp"})
    if (AtOrBelow(path, ok) && path.size() > ok.size()) return "";
  if (path == "/") return "a system directory";
  for (std::string_view sys :
       {"/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot", "/proc",
        "/sys", "/dev", "/run", "/var", "/opt", "/srv", "/snap", "/root"})
    if (AtOrBelow(path, sys)) return "a system directory";
  return "";
}

std::string DefaultMountRefusal(const std::string& source) {
  const std::string ask = ": it is not mounted there by default; choose where with --mount DIR";
  const std::string what = "the dataset was packed from " + source;
  if (!meta::IsCleanAbsolute(source)) return what + ", not a normal absolute path" + ask;
  if (std::string why = SystemPathReason(source); !why.empty()) return what + ", " + why + ask;
  struct stat st;
  const std::string existing = NearestExisting(source, &st);
  // The same rules for where the path's existing part really is (/tmp/x -> /usr).
  char real[PATH_MAX];
  if (::realpath(existing.c_str(), real)) {
    const std::string resolved =
        std::string(real) + source.substr(existing == "/" ? 0 : existing.size());
    if (std::string why = SystemPathReason(resolved); !why.empty())
      return what + ", which is " + resolved + ", " + why + ask;
    char cwd[PATH_MAX];
    if (::getcwd(cwd, sizeof cwd) && AtOrBelow(cwd, resolved))
      return what + ", which holds the working directory (it would be hidden)" + ask;
    const char* home = std::getenv("HOME");
    char home_real[PATH_MAX];
    if (home && *home && ::realpath(home, home_real) && AtOrBelow(home_real, resolved))
      return what + ", which holds your home directory (it would be hidden)" + ask;
  }
  const uid_t me = ::geteuid();
  const bool sticky_open = S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX) && (st.st_mode & S_IWOTH);
  if (me != 0 && st.st_uid != me && !(existing != source && sticky_open))
    return what + (existing == source ? ", a directory of uid " : ", below a directory of uid ") +
           std::to_string(st.st_uid) + " (" + existing + "), not yours" + ask;
  return "";
}

}  // namespace fanstore::fanrun
