// What path resolution answers (runtime/paths/resolve.h Resolve), and its flags: a value
// type shared by the resolver's interface and its parts (resolve_parts.h).
// Thread-safety: a plain value.
#pragma once

#include <cstdint>
#include <string>

namespace fanstore::runtime {

struct Resolved {
  enum Kind { kNative, kVirtual, kRewritten, kError } kind = kNative;
  uint32_t entry = 0;  // kVirtual
  int err = 0;         // kError: positive errno
  std::string path;    // kRewritten: an absolute native path
};

inline constexpr int kFollow = 1;   // follow a final symlink
inline constexpr int kEmptyOk = 2;  // AT_EMPTY_PATH: "" names dirfd itself

}  // namespace fanstore::runtime
