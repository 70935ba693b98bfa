#include "meta/member.h"

namespace fanstore::meta {

bool IsValidMemberPath(std::string_view path) {
  if (path.empty()) return true;
  size_t start = 0;
  for (;;) {
    const size_t slash = path.find('/', start);
    const std::string_view comp = path.substr(
        start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (comp.empty() || comp == "." || comp == ".." || comp.find('\0') != std::string_view::npos)
      return false;
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

std::string ShownPath(std::string_view path) {
  constexpr size_t kShown = 120;
  return path.size() <= kShown ? std::string(path) : std::string(path.substr(0, kShown)) + "...";
}

std::vector<std::string_view> SplitPath(std::string_view p) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i <= p.size()) {
    const size_t j = p.find('/', i);
    const size_t end = j == std::string_view::npos ? p.size() : j;
    if (end > i) out.push_back(p.substr(i, end - i));
    if (j == std::string_view::npos) break;
    i = j + 1;
  }
  return out;
}

std::string_view ParentPath(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? std::string_view() : path.substr(0, slash);
}

std::string_view BaseName(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace fanstore::meta
