#include "runtime/process/permission.h"

#include <sys/syscall.h>
#include <unistd.h>

#include "base/raw_syscall.h"

namespace fanstore::runtime {

using base::RawSyscall6;

const meta::Credentials& Caller::Load() {
  if (loaded_) return c_;
  loaded_ = true;
  switch (ids_) {
    case Ids::kFs:  // setfsuid(-1) changes nothing and returns the current fs id
      c_.uid = static_cast<uint32_t>(RawSyscall6(SYS_setfsuid, -1));
      c_.gid = static_cast<uint32_t>(RawSyscall6(SYS_setfsgid, -1));
      break;
    case Ids::kReal:
      c_.uid = static_cast<uint32_t>(RawSyscall6(SYS_getuid));
      c_.gid = static_cast<uint32_t>(RawSyscall6(SYS_getgid));
      break;
    case Ids::kEffective:
      c_.uid = static_cast<uint32_t>(RawSyscall6(SYS_geteuid));
      c_.gid = static_cast<uint32_t>(RawSyscall6(SYS_getegid));
      break;
  }
  static_assert(sizeof(gid_t) == sizeof(uint32_t));
  const long n = RawSyscall6(SYS_getgroups, sizeof groups_ / sizeof groups_[0],
                             reinterpret_cast<long>(groups_));
  c_.groups = groups_;
  c_.group_count = n > 0 ? static_cast<int>(n) : 0;
  return c_;
}

bool Caller::May(const meta::ImageEntry& e, unsigned want) {
  if (meta::OpenToAll(e.mode, want)) return true;
  return meta::MayAccess(Load(), e.mode, e.uid, e.gid, want);
}

bool MayReach(const meta::NamespaceView& ns, uint32_t entry, Caller* caller) {
  const meta::ImageEntry* e = &ns.entry(entry);
  if (e->flags & meta::kEntryPathOpen) return true;
  while (entry != 0) {  // (Attach checked that parents lead to the root)
    entry = e->parent;
    e = &ns.entry(entry);
    if (!caller->May(*e, meta::kMayExec)) return false;
  }
  return true;
}

}  // namespace fanstore::runtime
