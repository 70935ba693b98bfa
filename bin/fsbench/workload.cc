#include "bin/fsbench/workload.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <numeric>
#include <random>

namespace fanstore::fsbench {
namespace {

Status Walk(const std::string& dir, Workload& w) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return Status::FromErrno(dir, errno);
  w.dirs.push_back(dir);
  std::vector<std::string> subdirs;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) {
    const std::string p = dir + "/" + n;
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0) return Status::FromErrno(p, errno);
    if (S_ISDIR(st.st_mode)) {
      subdirs.push_back(p);
    } else if (S_ISREG(st.st_mode)) {
      w.files.push_back(p);
      w.sizes.push_back(static_cast<uint64_t>(st.st_size));
      w.total_bytes += static_cast<uint64_t>(st.st_size);
    }
  }
  for (const std::string& s : subdirs) FANSTORE_RETURN_IF_ERROR(Walk(s, w));
  return Status::Ok();
}

}  // namespace

Result<Workload> WalkTree(const std::string& root) {
  struct stat st;
  if (::stat(root.c_str(), &st) != 0) return Status::FromErrno(root, errno);
  if (!S_ISDIR(st.st_mode)) return Status::Error(root + ": not a directory");
  Workload w;
  std::string r = root;
  while (r.size() > 1 && r.back() == '/') r.pop_back();
  FANSTORE_RETURN_IF_ERROR(Walk(r, w));
  if (w.files.empty()) return Status::Error(root + ": no regular files to measure");
  return w;
}

Result<Workload> LoadList(const std::string& root, const std::string& list_file) {
  std::ifstream in(list_file);
  if (!in) return Status::FromErrno(list_file, errno ? errno : ENOENT);
  Workload w;
  std::string line;
  std::vector<std::string> dirs;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const std::string p = line[0] == '/' ? line : root + "/" + line;
    struct stat st;
    if (::stat(p.c_str(), &st) != 0) return Status::FromErrno(list_file + ": " + p, errno);
    w.files.push_back(p);
    w.sizes.push_back(static_cast<uint64_t>(st.st_size));
    w.total_bytes += static_cast<uint64_t>(st.st_size);
    dirs.push_back(p.substr(0, p.rfind('/')));
  }
  if (w.files.empty()) return Status::Error(list_file + ": empty file list");
  std::sort(dirs.begin(), dirs.end());
  dirs.erase(std::unique(dirs.begin(), dirs.end()), dirs.end());
  w.dirs = std::move(dirs);
  return w;
}

std::vector<uint32_t> EpochOrder(size_t n, Pattern pattern, uint64_t seed, uint64_t epoch) {
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  if (pattern == Pattern::kSequential) return order;
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + epoch + 1);
  for (size_t i = n; i > 1; --i) {
    const size_t j = static_cast<size_t>(rng() % i);
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

std::vector<uint32_t> ShareOf(const std::vector<uint32_t>& order, int rank, int nranks) {
  std::vector<uint32_t> share;
  share.reserve(order.size() / nranks + 1);
  for (size_t i = static_cast<size_t>(rank); i < order.size(); i += static_cast<size_t>(nranks))
    share.push_back(order[i]);
  return share;
}

}  // namespace fanstore::fsbench
