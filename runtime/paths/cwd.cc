// The virtual current directory: where the process is when it is inside the dataset (or
// the way to the dataset from a native cwd above or beside it), set by chdir and fchdir,
// kept for exec, and read by path resolution for relative paths.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "base/raw_syscall.h"
#include "runtime/names/mount_ways.h"
#include "runtime/paths/resolve.h"
#include "runtime/paths/resolve_parts.h"
#include "runtime/process/permission.h"
#include "runtime/process/prefilter_state.h"
#include "runtime/process/state.h"

namespace fanstore::runtime {
namespace resolve_parts {

std::atomic<int64_t> g_cwd{kCwdUnknown};
std::atomic<const std::string*> g_cwd_to_mount[kSpellings] = {};
std::atomic<const std::string*> g_cwd_physical{nullptr};

}  // namespace resolve_parts
namespace {

using namespace resolve_parts;

// The interned copy of `way`; nullptr once 64 distinct ways were made (that many depths
// and spellings: the cwd is then taken as having no way to the mount point).
const std::string* Way(std::string_view way) {
  static std::atomic<const std::string*> table[64];
  for (auto& slot : table) {
    const std::string* p = slot.load(std::memory_order_acquire);
    if (!p) {
      auto* made = new std::string(way);
      if (slot.compare_exchange_strong(p, made, std::memory_order_acq_rel)) return made;
      delete made;  // another thread filled the slot (p is its string)
    }
    if (*p == way) return p;
  }
  return nullptr;
}
// The kernel's own cwd (st_dev, st_ino) when the virtual one was set. It is the dataset's
// skeleton directory when fanrun could make it, otherwise wherever the process was: a
// program exec'd from here inherits that kernel cwd, and is told the virtual one as long
// as the two still go together (runtime/calls/inherit.h).
std::atomic<uint64_t> g_cwd_kdev{0}, g_cwd_kino{0};
// A vfork child's chdir into the dataset (posix_spawn's chdir action, Python's
// subprocess(cwd=...)), kept for its exec. The child shares its parent's memory, so the
// record is tagged with the child's pid, and the parent never takes one that is not its own.
struct VforkCwd {
  pid_t pid;
  uint32_t entry;
  uint64_t dev, ino;
};
constexpr uint32_t kNativeCwd = ~0u;  // the child chdir'ed natively
thread_local VforkCwd t_vfork_cwd __attribute__((tls_model("initial-exec"))) = {0, 0, 0, 0};

void RefreshCwd(const State& s) {
  char buf[4096];
  const long n = base::RawSyscall6(SYS_getcwd, reinterpret_cast<long>(buf), sizeof buf);
  std::string_view rest;
  uint32_t from = 0;
  if (n > 0 && UnderMount(s, std::string_view(buf, static_cast<size_t>(n - 1)), &rest, &from)) {
    const Resolved r = Walk(s, from, rest, true);
    if (r.kind == Resolved::kVirtual && IsDir(s.ns.entry(r.entry))) {
      SetCwdVirtual(r.entry);
      return;
    }
  }
  // Above the mount point ("/", or a proper prefix followed by '/'): the way down; elsewhere
  // the way up and down. One is kept for each spelling of the mount point.
  const std::string_view cwd(buf, n > 0 ? static_cast<size_t>(n - 1) : 0);
  bool above = false, beside = false;
  const auto spellings = s.spellings();
  for (size_t k = 0; k < kSpellings; ++k) {
    const std::string_view m = k < spellings.size() ? spellings[k] : std::string_view();
    std::string_view down;
    const bool here = n > 0 && DownFromAbove(cwd, m, &down);
    const std::string way = here ? std::string(down) : n > 0 ? WayUpAndDown(cwd, m) : std::string();
    const std::string* interned = way.empty() ? nullptr : Way(way);
    g_cwd_to_mount[k].store(interned);
    above |= interned && here;
    beside |= interned && !here;
  }
  if (above || beside) {
    g_cwd_physical.store(Way(cwd));
    g_cwd.store(above ? kCwdAbove : kCwdBeside);
    // every relative path may lead into the dataset from above, from beside only those
    // that start with ".."
    g_prefilter.cwd_virtual.store(above ? 1 : 2);
    return;
  }
  g_cwd.store(kCwdNative);
  g_prefilter.cwd_virtual.store(0);
}

}  // namespace

using namespace resolve_parts;

bool CwdIsVirtual(uint32_t* entry) {
  const State* s = Get();
  int64_t c = g_cwd.load(std::memory_order_relaxed);
  if (c == kCwdUnknown && s) {
    RefreshCwd(*s);
    c = g_cwd.load(std::memory_order_relaxed);
  }
  if (c < 0) return false;
  *entry = static_cast<uint32_t>(c);
  return true;
}

bool KernelCwdId(uint64_t* dev, uint64_t* ino) {
  struct stat st;
  if (base::RawSyscall6(SYS_newfstatat, AT_FDCWD, reinterpret_cast<long>(""),
                        reinterpret_cast<long>(&st), AT_EMPTY_PATH) != 0)
    return false;
  *dev = st.st_dev;
  *ino = st.st_ino;
  return true;
}

bool CwdForExec(uint32_t* entry, uint64_t* dev, uint64_t* ino) {
  const VforkCwd& v = t_vfork_cwd;
  const bool own = v.pid != 0 && v.pid == static_cast<pid_t>(base::RawSyscall6(SYS_getpid));
  const int64_t c = !own                    ? g_cwd.load(std::memory_order_relaxed)
                    : v.entry == kNativeCwd ? -1
                                            : v.entry;
  if (c < 0 || !KernelCwdId(dev, ino)) return false;
  *entry = static_cast<uint32_t>(c);
  return own ? *dev == v.dev && *ino == v.ino
             : *dev == g_cwd_kdev.load(std::memory_order_relaxed) &&
                   *ino == g_cwd_kino.load(std::memory_order_relaxed);
}

long ChdirInVforkChild(const char* path) {
  // Nothing here may allocate or touch the parent's tables: the walk is WalkCore's, and a
  // path that leaves the dataset is put together on the stack for the kernel.
  const pid_t self = static_cast<pid_t>(base::RawSyscall6(SYS_getpid));
  const State* s = Get();
  auto native = [&](const char* p) {
    t_vfork_cwd = {self, kNativeCwd, 0, 0};  // the exec passes no virtual cwd
    return base::RawSyscall6(SYS_chdir, reinterpret_cast<long>(p));
  };
  const size_t len = path ? std::strlen(path) : 0;
  std::string_view rest;
  uint32_t start = 0;
  if (len > 0 && path[0] == '/') {
    if (!UnderMount(*s, std::string_view(path, len), &rest, &start)) return native(path);
  } else {
    const int64_t c = g_cwd.load(std::memory_order_relaxed);
    if (len == 0 || c < 0) return native(path);
    start = static_cast<uint32_t>(c);
    rest = std::string_view(path, len);
  }
  const WalkResult w = WalkCore(*s, start, rest, true);
  if (w.kind == Resolved::kError) return -w.err;
  char buf[4096];
  if (w.kind == Resolved::kRewritten) {
    size_t k = 0;
    bool fits = true;
    JoinRewritten(w, [&](std::string_view p) {
      fits = fits && k + p.size() < sizeof buf;
      if (fits) std::memcpy(buf + k, p.data(), p.size());
      k += p.size();
    });
    if (!fits) return -ENAMETOOLONG;
    buf[k] = '\0';
    return native(buf);
  }
  if (!IsDir(s->ns.entry(w.entry))) return -ENOTDIR;
  if (!Caller().May(s->ns.entry(w.entry), meta::kMayExec)) return -EACCES;
  // Follow natively too where fanrun made the directory; record it either way.
  const std::string& m = s->physical_mount();
  const std::string_view dir = s->ns.path(s->ns.entry(w.entry));
  if (m.size() + 1 + dir.size() < sizeof buf) {
    std::memcpy(buf, m.data(), m.size());
    size_t k = m.size();
    if (!dir.empty()) {
      buf[k++] = '/';
      std::memcpy(buf + k, dir.data(), dir.size());
      k += dir.size();
    }
    buf[k] = '\0';
    base::RawSyscall6(SYS_chdir, reinterpret_cast<long>(buf));
  }
  VforkCwd v{self, w.entry, 0, 0};
  t_vfork_cwd = KernelCwdId(&v.dev, &v.ino) ? v : VforkCwd{self, kNativeCwd, 0, 0};
  return 0;
}

bool AdoptCwd(uint32_t entry, uint64_t dev, uint64_t ino) {
  const State* s = Get();
  uint64_t kdev, kino;
  if (!s || entry >= s->ns.size() || !IsDir(s->ns.entry(entry)) || !KernelCwdId(&kdev, &kino) ||
      kdev != dev || kino != ino)
    return false;
  SetCwdVirtual(entry);
  return true;
}

void SetCwdVirtual(uint32_t entry) {
  uint64_t dev = 0, ino = 0;
  KernelCwdId(&dev, &ino);
  g_cwd_kdev.store(dev, std::memory_order_relaxed);
  g_cwd_kino.store(ino, std::memory_order_relaxed);
  g_cwd.store(entry);
  g_prefilter.cwd_virtual.store(1);
}
void SetCwdNative() {
  g_cwd.store(
      kCwdUnknown);  // recomputed on the next relative path: a native chdir may enter the mount
  g_prefilter.cwd_virtual.store(1);
}

}  // namespace fanstore::runtime
