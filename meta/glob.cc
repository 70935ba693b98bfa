#include "meta/glob.h"

#include <fnmatch.h>

#include <string>
#include <vector>

namespace fanstore::meta {
namespace {

std::vector<std::string> Split(std::string_view s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t slash = s.find('/', start);
    const size_t end = slash == std::string_view::npos ? s.size() : slash;
    if (end > start) out.emplace_back(s.substr(start, end - start));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return out;
}

bool Match(const std::vector<std::string>& pat, size_t pi, const std::vector<std::string>& segs,
           size_t si) {
  if (pi == pat.size()) return si == segs.size();
  if (pat[pi] == "**") {
    for (size_t k = si; k <= segs.size(); ++k)
      if (Match(pat, pi + 1, segs, k)) return true;
    return false;
  }
  if (si == segs.size()) return false;
  if (::fnmatch(pat[pi].c_str(), segs[si].c_str(), 0) != 0) return false;
  return Match(pat, pi + 1, segs, si + 1);
}

}  // namespace

bool GlobMatch(std::string_view pattern, std::string_view path) {
  return Match(Split(pattern), 0, Split(path), 0);
}

}  // namespace fanstore::meta
