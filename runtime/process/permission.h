// Permission checks of served calls, as the kernel makes them (meta/access.h), for the
// calling process's ids. The ids are read from the kernel when a check needs them (a
// process may change its ids, and a vfork child shares memory with its parent): an entry
// anyone may reach and use, the common case, costs no system call at all.
// Thread-safety: a Caller belongs to one call on one thread (it lives on the hook stack);
// it allocates nothing, so a vfork child may use it.
#pragma once

#include <cstdint>

#include "meta/access.h"
#include "meta/namespace_image.h"

namespace fanstore::runtime {

class Caller {
 public:
  enum class Ids { kFs, kReal, kEffective };  // access(2) uses the real ids
  explicit Caller(Ids ids = Ids::kFs) : ids_(ids) {}
  // True when the caller may `want` (meta::kMay*) on `e` as an inode.
  bool May(const meta::ImageEntry& e, unsigned want);

 private:
  const meta::Credentials& Load();

  Ids ids_;
  bool loaded_ = false;
  meta::Credentials c_;
  // Supplementary groups beyond this many (getgroups' EINVAL) count as none: a check may
  // then deny what the kernel grants through such a group, never the other way round.
  uint32_t groups_[256];
};

// Whether the caller may reach `entry`: search permission on every directory above it in
// the dataset. Entries flagged kEntryPathOpen need no check (and no ids).
bool MayReach(const meta::NamespaceView& ns, uint32_t entry, Caller* caller);

}  // namespace fanstore::runtime
