#include "runtime/process/state.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <iterator>  // std::size

#include "base/clock.h"
#include "base/map_aligned.h"
#include "base/raw_syscall.h"
#include "intercept/clone_mark.h"
#include "intercept/preload_log.h"
#include "io/resident.h"
#include "runtime/process/env.h"
#include "runtime/process/fd_table.h"
#include "runtime/process/held_blobs.h"

namespace fanstore::runtime {
namespace {

State* g_state = nullptr;

void AfterFork() {
  if (!g_state) return;
  g_state->pid.store(static_cast<pid_t>(base::RawSyscall6(SYS_getpid)));
  Fds().OnForkChild();  // the child's copies of virtual fds refer to the descriptions too
}

}  // namespace

State* Get() {
  return g_state;
}

// (here, above the fd table: the table takes the reserved fd range the state chose)
FdTable& Fds() {
  // Never destroyed: hooks may run during exit.
  static FdTable* t = [] {
    FdTable* made = new FdTable(InheritedSlabFd(), Get() ? Get()->reserved_lo : 0);
    if (!made) {
      static const char kMsg[] = "fanstore: runtime start-up failed: no memory for the fd table\n";
      base::RawSyscall6(SYS_write, 2, reinterpret_cast<long>(kMsg), sizeof kMsg - 1);
      base::RawSyscall6(SYS_exit_group, 121);
    }
    return made;
  }();
  return *t;
}

bool State::InVforkChild() const {
  // No clone mark on this thread: it has not returned as a child from clone/vfork since it
  // last proved itself (intercept/clone_mark.h), so no system call is needed.
  if (intercept::CloneMarkComplete() && !intercept::t_clone_child) return false;
  const bool child =
      static_cast<pid_t>(base::RawSyscall6(SYS_getpid)) != pid.load(std::memory_order_relaxed);
  if (!child) intercept::t_clone_child = 0;  // a forked child or a new thread, not a vfork child
  return child;
}

namespace {

// fd moved into the reserved range (the runtime's own fds live there); raw is closed.
long IntoReserved(long raw, int reserved_lo) {
  const long target = base::RawSyscall6(SYS_fcntl, raw, F_DUPFD_CLOEXEC, reserved_lo);
  base::RawSyscall6(SYS_close, raw);
  return target;
}

// Moves `raw` into the reserved range and stores it in *slot unless another thread stored
// one first (then that one is kept and this closed). Returns the fd in *slot, or -errno.
int Publish(std::atomic<int>* slot, long raw, int reserved_lo) {
  const long target = IntoReserved(raw, reserved_lo);
  if (target < 0) return static_cast<int>(target);
  int expected = -1;
  if (!slot->compare_exchange_strong(expected, static_cast<int>(target))) {
    base::RawSyscall6(SYS_close, target);  // another thread won
    return expected;
  }
  return static_cast<int>(target);
}

// The held blobs' identities fanrun wrote beside the image (none: nothing to check).
std::vector<BlobId> ReadHeldIds(const std::string& image, size_t parts) {
  std::vector<BlobId> ids;
  const std::string path = HeldIdsPathBeside(image);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ids;
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  ::close(fd);
  ids.resize(parts);
  ForEachHeldId(text, [&](uint32_t p, BlobId id) {
    if (p < parts) ids[p] = id;
  });
  return ids;
}

}  // namespace

std::string State::ShownPartition(uint32_t p) const {
  const std::string& path = parts[p];
  const size_t slash = path.rfind('/');
  if (data.empty() || slash < 5 || path.compare(slash - 5, 5, "/data") != 0) return path;
  return data + path.substr(slash);
}

long State::CheckHeld(uint32_t p, long fd) {
  if (fd < 0) {
    // (a container's DATA, bound in its place: gone when DATA was repacked or moved)
    if (!said_not_held.exchange(true))
      intercept::Logger().error(
          "{}: cannot be opened ({}; DATA repacked or moved while the job runs?): its "
          "members are not read",
          ShownPartition(p), std::strerror(static_cast<int>(-fd)));
    return -EIO;
  }
  if (p >= held_ids.size() || !held_ids[p].known()) return fd;
  struct stat st;
  if (base::RawSyscall6(SYS_fstat, fd, reinterpret_cast<long>(&st)) == 0 && held_ids[p].Same(st))
    return fd;
  base::RawSyscall6(SYS_close, fd);
  if (!said_not_held.exchange(true))
    intercept::Logger().error(
        "{}: not the file this job started with (DATA was repacked or moved while the job "
        "runs): its members are not read",
        ShownPartition(p));
  return -EIO;
}

int State::BlobFd(uint32_t p) {
  if (p >= parts.size() || parts[p].empty()) return -EIO;
  int fd = blob_fds[p].load(std::memory_order_acquire);
  if (fd >= 0) return fd;
  int provisional = -1;
  if (!staging_from.empty()) {
    provisional = provisional_fds[p].load(std::memory_order_acquire);
    if (provisional >= 0 &&
        base::CoarseMonotonicNs() < recheck_at_ns[p].load(std::memory_order_relaxed))
      return provisional;
  }
  long raw = base::RawSyscall6(SYS_openat, AT_FDCWD, reinterpret_cast<long>(parts[p].c_str()),
                               O_RDONLY | O_CLOEXEC);
  if (raw == -ENOENT && !staging_from.empty()) {
    // Not copied yet: the blob in place. (A provisional fd is never closed: another thread
    // may be reading through it.)
    recheck_at_ns[p].store(base::CoarseMonotonicNs() + kRecheckNs, std::memory_order_relaxed);
    if (provisional >= 0) return provisional;
    const std::string& final_path = parts[p];
    const std::string in_place = staging_from + final_path.substr(final_path.rfind('/'));
    const long ip = CheckHeld(
        p, base::RawSyscall6(SYS_openat, AT_FDCWD, reinterpret_cast<long>(in_place.c_str()),
                             O_RDONLY | O_CLOEXEC));
    if (ip < 0) return static_cast<int>(ip);
    return Publish(&provisional_fds[p], ip, reserved_lo);
  }
  if (parts[p].compare(0, held_dir.size(), held_dir) == 0) raw = CheckHeld(p, raw);
  if (raw < 0) return static_cast<int>(raw);
  // Partition p at reserved top - 1 - p, top down.
  return Publish(&blob_fds[p], raw, reserved_lo);
}

int State::LandingFd(uint32_t p) {
  if (p >= parts.size() || parts[p].empty() || !landing_fds) return -EIO;
  if (const int fd = landing_fds[p].load(std::memory_order_acquire); fd >= 0) return fd;
  const std::string copying = parts[p] + ".staging";
  long raw = base::RawSyscall6(SYS_openat, AT_FDCWD, reinterpret_cast<long>(copying.c_str()),
                               O_RDONLY | O_CLOEXEC);
  if (raw == -ENOENT)  // done and renamed since
    raw = base::RawSyscall6(SYS_openat, AT_FDCWD, reinterpret_cast<long>(parts[p].c_str()),
                            O_RDONLY | O_CLOEXEC);
  if (raw < 0) return static_cast<int>(raw);
  return Publish(&landing_fds[p], raw, reserved_lo);
}

const uint8_t* State::BlobMap(uint32_t p, uint64_t* size, bool* resident) {
  uintptr_t m = blob_maps[p].load(std::memory_order_acquire);
  if (m == 0) {
    const int fd = BlobFd(p);
    if (!BlobSettled(p)) return nullptr;  // read in place while the copy is made: no mapping
    struct stat st;
    uintptr_t made = 1;
    long len = 0;
    if (fd >= 0 && base::RawSyscall6(SYS_fstat, fd, reinterpret_cast<long>(&st)) == 0 &&
        st.st_size > 0) {
      len = st.st_size;
      // (2 MiB-aligned: a staged copy's huge folios are then mapped whole, one fault each;
      // device reads bring blob ranges in through it as 2 MiB folios, blob_read.cc)
      const long r = base::MapForHugeReads(fd, static_cast<size_t>(len));
      if (static_cast<unsigned long>(r) < static_cast<unsigned long>(-4095))
        made = static_cast<uintptr_t>(r);
    }
    // Racing threads both map; the size goes out before the mapping is published. Both
    // store this blob's size; should a cut blob make them differ, mincore (ResidentView)
    // refuses any page outside the mapping, so no read goes past it.
    if (made > 1) {
      struct statfs fs;
      blob_sizes[p].store(static_cast<uint64_t>(len), std::memory_order_relaxed);
      blob_resident[p].store(base::RawSyscall6(SYS_fstatfs, fd, reinterpret_cast<long>(&fs)) == 0 &&
                                 io::AlwaysResident(staged, static_cast<long>(fs.f_type)),
                             std::memory_order_relaxed);
    }
    uintptr_t expected = 0;
    if (blob_maps[p].compare_exchange_strong(expected, made, std::memory_order_acq_rel)) {
      m = made;
    } else {  // another thread mapped it first
      if (made > 1) base::RawSyscall6(SYS_munmap, static_cast<long>(made), len);
      m = expected;
    }
  }
  if (m <= 1) return nullptr;
  *size = blob_sizes[p].load(std::memory_order_relaxed);
  *resident = blob_resident[p].load(std::memory_order_relaxed);
  return reinterpret_cast<const uint8_t*>(m);
}

void State::ShrinkCutBlobs() {
  for (size_t p = 0; p < parts.size(); ++p) {
    if (blob_maps[p].load(std::memory_order_acquire) <= 1) continue;
    struct stat st;
    const int fd = blob_fds[p].load(std::memory_order_relaxed);
    if (fd < 0 || base::RawSyscall6(SYS_fstat, fd, reinterpret_cast<long>(&st)) != 0) continue;
    const uint64_t now = static_cast<uint64_t>(st.st_size);
    uint64_t was = blob_sizes[p].load(std::memory_order_relaxed);
    while (now < was && !blob_sizes[p].compare_exchange_weak(was, now, std::memory_order_relaxed)) {
    }
  }
}

Status Init() {
  const env::Env e = env::ReadEnv();
  if (e.image.empty()) return Status::Ok();  // not under fanrun: stay out of the way
  const char* image = e.image.c_str();
  const int fd = ::open(image, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(image, errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return Status::FromErrno(image, errno);
  }
  void* m = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (m == MAP_FAILED) return Status::FromErrno(image, errno);
  // fanrun checked the whole image when it built it, in a private directory; an image this
  // user owns and nobody else may write is the same bytes, and checking it again would cost
  // every exec'd process a pass over the namespace (40 ms for 300 k entries, measured).
  // Anyone else's image is checked whole.
  const std::span<const uint8_t> bytes(static_cast<const uint8_t*>(m),
                                       static_cast<size_t>(st.st_size));
  auto view = st.st_uid == ::geteuid() && !(st.st_mode & 022)
                  ? meta::NamespaceView::AttachLayout(bytes)
                  : meta::NamespaceView::Attach(bytes);
  if (!view.ok()) return Status::Error(std::string(image) + ": " + view.status().message());
  auto* s = new State();
  s->ns = *view;
  if (e.mount.empty() || e.mount[0] != '/')
    return Status::Error(std::string(env::kMount) + " must be an absolute path");
  s->mount = e.mount;
  while (s->mount.size() > 1 && s->mount.back() == '/') s->mount.pop_back();
  if (!e.mount_real.empty()) {
    s->mount_real = e.mount_real;
    while (s->mount_real.size() > 1 && s->mount_real.back() == '/') s->mount_real.pop_back();
    if (s->mount_real == s->mount) s->mount_real.clear();
  }
  {
    for (std::string_view rest(e.mount_aliases);
         !rest.empty() && s->aliases.size() < std::size(s->alias_entries);) {
      const size_t nl = rest.find('\n');
      std::string a(rest.substr(0, nl));
      rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
      uint32_t entry = 0;  // a link to a directory inside the dataset: "LINK\tDIR"
      if (const size_t tab = a.find('\t'); tab != std::string::npos) {
        entry = s->ns.Lookup(std::string_view(a).substr(tab + 1));
        a.resize(tab);
        if (entry == meta::kNoEntry ||
            s->ns.entry(entry).kind != static_cast<uint8_t>(meta::Kind::kDir))
          continue;
      }
      while (a.size() > 1 && a.back() == '/') a.pop_back();
      if (a.size() <= 1 || a[0] != '/' || a == s->mount || a == s->mount_real) continue;
      s->alias_entries[s->aliases.size()] = entry;
      // (lstat, while the runtime is not serving yet)
      struct stat st;
      if (::lstat(a.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
        s->alias_links |= 1u << s->aliases.size();
      s->aliases.push_back(a);
    }
  }
  for (uint32_t p = 0; p < s->ns.partition_count(); ++p) {
    std::string path(s->ns.partition_path(p));
    // (in a container: where the job's directory is seen there, bin/container.h)
    if (!e.map_from.empty() && path.compare(0, e.map_from.size(), e.map_from) == 0 &&
        path[e.map_from.size()] == '/')
      path = e.map_to + path.substr(e.map_from.size());
    s->parts.push_back(std::move(path));
  }
  s->blob_fds.reset(new std::atomic<int>[s->parts.size() + 1]);
  for (size_t p = 0; p <= s->parts.size(); ++p) s->blob_fds[p].store(-1);
  s->blob_maps.reset(new std::atomic<uintptr_t>[s->parts.size() + 1]);
  s->blob_sizes.reset(new std::atomic<uint64_t>[s->parts.size() + 1]);
  s->blob_resident.reset(new std::atomic<bool>[s->parts.size() + 1]);
  for (size_t p = 0; p <= s->parts.size(); ++p) {
    s->blob_maps[p].store(0);
    s->blob_sizes[p].store(0);
    s->blob_resident[p].store(false);
  }
  s->verify_every_read = e.verify_all;
  s->trust_raw = e.verify_none;
  s->image_path = e.image;
  s->stats_target = e.stats;
  if (e.mapped_reads) s->mapped_reads = *e.mapped_reads;
  if (e.readahead) s->readahead = *e.readahead;
  s->agent = e.agent;
  s->data = e.data;
  s->node_cache = e.node_cache;
  s->staged = e.staged;
  s->staging_from = e.staging_from;
  s->provisional_fds.reset(new std::atomic<int>[s->parts.size() + 1]);
  s->recheck_at_ns.reset(new std::atomic<int64_t>[s->parts.size() + 1]);
  for (size_t p = 0; p <= s->parts.size(); ++p) {
    s->provisional_fds[p].store(-1);
    s->recheck_at_ns[p].store(0);
  }
  if (e.agent_timeout_ms) s->agent_timeout_ms = *e.agent_timeout_ms;
  // (only in a container, FANSTORE_SERVED_MARK set: elsewhere the link reaches fanrun's
  // own descriptor, which cannot be another file, so a process pays no read of the file
  // and no fstat per blob for it)
  if (!e.served_mark.empty()) s->held_ids = ReadHeldIds(e.image, s->parts.size());
  if (!s->staging_from.empty()) {
    s->landing = io::LandingMap::Attach(io::LandingPathBeside(e.image));
    s->landing_fds.reset(new std::atomic<int>[s->parts.size() + 1]);
    for (size_t p = 0; p <= s->parts.size(); ++p) s->landing_fds[p].store(-1);
  }
  s->held_dir = e.image.substr(0, e.image.rfind('/') + 1) + "data/";
  struct rlimit rl;
  ::getrlimit(RLIMIT_NOFILE, &rl);
  const long soft = static_cast<long>(rl.rlim_cur);
  // (a blob fd per partition; while fanrun stages, also the in-place blob's and the copy
  // being made's: three)
  const long per_part = s->staging_from.empty() ? 1 : 3;
  const long need = static_cast<long>(s->parts.size()) * per_part + 8;
  s->reserved_lo = static_cast<int>(soft - need > 64 ? soft - need : 0);
  if (s->stats_target == "1" && s->reserved_lo > 0)
    s->stats_fd =
        ::fcntl(2, F_DUPFD_CLOEXEC, s->reserved_lo + static_cast<int>(s->parts.size()) + 2);
  s->pid.store(::getpid());
  pthread_atfork(nullptr, nullptr, AfterFork);
  g_state = s;
  if (!e.served_mark.empty()) {  // (fanrun asks whether any process of CMD got this far)
    const int mark =
        ::open(e.served_mark.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (mark >= 0) ::close(mark);
  }
  return Status::Ok();
}

}  // namespace fanstore::runtime
