// Path globs for --broadcast: '/'-separated segments; "**" matches any number of whole
// segments (zero included); other segments use fnmatch(3) rules within one component.
// Thread-safety: pure function.
#pragma once

#include <string_view>

namespace fanstore::meta {

// True if member path `path` (relative, no leading '/') matches `pattern`.
// "val/**" matches "val", "val/a" and "val/a/b"; "*.txt" matches top-level .txt files only.
bool GlobMatch(std::string_view pattern, std::string_view path);

}  // namespace fanstore::meta
