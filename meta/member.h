// Member: one entry of a packed dataset as the packer produces it and readers see it.
// Thread-safety: plain value.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "meta/format.h"

namespace fanstore::meta {

struct Member {
  std::string path;  // relative, '/'-separated, "" for the root
  Kind kind = Kind::kFile;
  uint32_t mode = 0;  // st_mode with type bits
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint64_t size = 0;  // st_size (symlink: target length)
  int64_t mtime_ns = 0;
  std::string target;  // symlink target
  // Set by the writer / read from the index:
  uint64_t data_offset = 0;
  uint64_t stored_size = 0;
  Codec codec = Codec::kRaw;
  uint32_t crc32c = 0;
};

// Checks that `path` is a well-formed member path: no leading or trailing '/', no empty,
// "." or ".." component, no NUL. The root is "".
bool IsValidMemberPath(std::string_view path);

// `path` for an error message: its first 120 bytes and "..." when it is longer, so that the
// message stays one short line (member paths may be up to kMaxPathBytes).
std::string ShownPath(std::string_view path);

// The non-empty components of a '/'-separated path, in order ("a//b/" -> {"a", "b"}).
std::vector<std::string_view> SplitPath(std::string_view path);

// The parent of a member path ("" for top-level entries and for the root itself).
std::string_view ParentPath(std::string_view path);
// Whether `p` is absolute with no empty, "." or ".." component and no trailing '/' ("/"
// itself is): the kernel resolves each of its prefixes as it reads.
inline bool IsCleanAbsolute(std::string_view p) {
  if (p.empty() || p[0] != '/') return false;
  if (p.size() == 1) return true;
  if (p.back() == '/') return false;
  for (size_t i = 1; i <= p.size();) {
    size_t j = p.find('/', i);
    if (j == std::string_view::npos) j = p.size();
    const std::string_view c = p.substr(i, j - i);
    if (c.empty() || c == "." || c == "..") return false;
    i = j + 1;
  }
  return true;
}
// The last component ("" for the root).
std::string_view BaseName(std::string_view path);

}  // namespace fanstore::meta
