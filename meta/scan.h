// Source-tree scanning for the packer: walks a directory with openat (so depth is not
// limited by PATH_MAX), lstat's every entry, and returns the members sorted by path.
// Symlinks are kept, not followed. FIFOs, sockets and devices are skipped with a warning.
// Thread-safety: reentrant.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "meta/member.h"

namespace fanstore::meta {

struct ScanResult {
  std::vector<Member> members;  // sorted by path; [0] is the root ""
  uint64_t skipped = 0;         // special files left out
};

// `warn` receives one line per skipped entry.
Result<ScanResult> ScanTree(const std::string& root,
                            const std::function<void(const std::string&)>& warn);

// Opens `rel` below `dirfd` read-only, walking component by component when the path is too
// long for one openat. Returns an fd or a negative errno.
int OpenRelative(int dirfd, const std::string& rel, int flags);

}  // namespace fanstore::meta
