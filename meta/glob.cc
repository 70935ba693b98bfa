#include "meta/glob.h"

#include <fnmatch.h>

#include <string>
#include <vector>

#include "meta/member.h"

namespace fanstore::meta {
namespace {

bool Match(const std::vector<std::string_view>& pat, size_t pi,
           const std::vector<std::string_view>& segs, size_t si) {
  if (pi == pat.size()) return si == segs.size();
  if (pat[pi] == "**") {
    for (size_t k = si; k <= segs.size(); ++k)
      if (Match(pat, pi + 1, segs, k)) return true;
    return false;
  }
  if (si == segs.size()) return false;
  if (::fnmatch(std::string(pat[pi]).c_str(), std::string(segs[si]).c_str(), 0) != 0) return false;
  return Match(pat, pi + 1, segs, si + 1);
}

}  // namespace

bool GlobMatch(std::string_view pattern, std::string_view path) {
  return Match(SplitPath(pattern), 0, SplitPath(path), 0);
}

}  // namespace fanstore::meta
