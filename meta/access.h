// Access checks as the kernel makes them (generic_permission): one class of mode bits
// applies, the owner's if the caller's fs uid owns the inode, else the group's if the
// inode's group is the caller's fs gid or one of its supplementary groups, else the
// others'; a denied class never falls through to the next. A caller with fs uid 0 has
// CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH: read and write always, search of a directory
// always, execute of a file only if some execute bit is set. Header-only and free of
// floating point and library calls, so the preload runtime and the tools share it.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

namespace fanstore::meta {

inline constexpr unsigned kMayRead = 4, kMayWrite = 2, kMayExec = 1;  // (and search)

// Who asks. `groups` are the supplementary groups (getgroups), not owned.
struct Credentials {
  uint32_t uid = 0, gid = 0;
  const uint32_t* groups = nullptr;
  int group_count = 0;
};

inline bool InGroup(const Credentials& c, uint32_t gid) {
  if (c.gid == gid) return true;
  for (int i = 0; i < c.group_count; ++i)
    if (c.groups[i] == gid) return true;
  return false;
}

// True when the kernel would grant `want` (kMay* bits) on an inode of `mode` (st_mode, type
// included), owner `uid` and group `gid`.
inline bool MayAccess(const Credentials& c, uint32_t mode, uint32_t uid, uint32_t gid,
                      unsigned want) {
  constexpr uint32_t kTypeMask = 0170000, kDir = 0040000;
  if (c.uid == 0) {
    if (!(want & kMayExec) || (mode & kTypeMask) == kDir) return true;
    return (mode & 0111) != 0;
  }
  unsigned have;
  if (c.uid == uid)
    have = (mode >> 6) & 7;
  else if (InGroup(c, gid))
    have = (mode >> 3) & 7;
  else
    have = mode & 7;
  return (have & want) == want;
}

// The cheap answer first: when the others' bits grant `want`, every caller is granted it
// (the owner's and group's classes only matter when they deny, which a dataset's modes
// rarely do).
inline bool OpenToAll(uint32_t mode, unsigned want) {
  return (mode & want & 7) == want && ((mode >> 3) & want & 7) == want &&
         ((mode >> 6) & want & 7) == want;
}

}  // namespace fanstore::meta
