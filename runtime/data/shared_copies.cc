#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <memory>
#include <new>
#include <string>
#include <vector>

#include "base/raw_syscall.h"
#include "intercept/preload_log.h"
#include "io/mapped_copies.h"
#include "io/pieces.h"
#include "runtime/data/member_io.h"
#include "runtime/data/remote.h"
#include "runtime/process/state.h"

namespace fanstore::runtime {
namespace {

// Removes the node's mapped copies used least recently until `need` more bytes fit in
// `bound` (io/mapped_copies.h). Another process may remove the same copy at once, or one
// may appear meanwhile: the bound is kept as well as the directory shows it.
void MakeRoomForCopy(const std::string& dir, uint64_t need, uint64_t bound) {
  const long dfd = base::RawSyscall6(SYS_openat, AT_FDCWD, reinterpret_cast<long>(dir.c_str()),
                                     O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return;
  std::vector<std::string> names;
  std::vector<io::MappedCopy> copies;
  alignas(8) char buf[8192];
  for (;;) {
    const long n = base::RawSyscall6(SYS_getdents64, dfd, reinterpret_cast<long>(buf), sizeof buf);
    if (n <= 0) break;
    for (long at = 0; at < n;) {
      struct Dirent64 {
        uint64_t ino;
        int64_t off;
        unsigned short reclen;
        unsigned char type;
        char name[1];
      };
      const auto* d = reinterpret_cast<const Dirent64*>(buf + at);
      at += d->reclen;
      if (!io::IsMappedCopyName(d->name)) continue;
      struct stat st;
      if (base::RawSyscall6(SYS_newfstatat, dfd, reinterpret_cast<long>(d->name),
                            reinterpret_cast<long>(&st), AT_SYMLINK_NOFOLLOW) != 0)
        continue;
      names.emplace_back(d->name);
      copies.push_back({static_cast<uint64_t>(st.st_size),
                        st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec});
    }
  }
  for (const size_t i : io::CopiesToRemove(copies, need, bound)) {
    base::RawSyscall6(SYS_unlinkat, dfd, reinterpret_cast<long>(names[i].c_str()), 0);
    intercept::Logger().debug("node cache: {}/{} removed ({} bytes): mapped copies within {} bytes",
                              dir, names[i], copies[i].bytes, bound);
  }
  base::RawSyscall6(SYS_close, dfd);
}

}  // namespace

long SharedCopyOf(uint32_t entry) {
  State& s = *Get();
  if (s.node_cache.empty()) return -ENOENT;
  const std::string path =
      s.node_cache + "/" + std::string(io::kMappedCopyPrefix) + std::to_string(entry);
  const long ro = base::RawSyscall6(SYS_openat, AT_FDCWD, reinterpret_cast<long>(path.c_str()),
                                    O_RDONLY | O_CLOEXEC);
  if (ro >= 0) {  // made before, whole (it is renamed into place only when complete)
    // used now: the last to be removed when room is made (utimensat(fd, NULL, NULL): now)
    base::RawSyscall6(SYS_utimensat, ro, 0, 0, 0);
    return ro;
  }
  const uint64_t size = s.ns.entry(entry).size;
  if (const uint64_t bound = NodeCacheBytes(); bound > 0)
    MakeRoomForCopy(s.node_cache, size, bound);
  // Made here under a name of this thread's own, then renamed into place: a process that
  // races us makes its own, the last rename wins, and both are the member's bytes.
  const std::string tmp = path + "." + std::to_string(base::RawSyscall6(SYS_gettid)) + ".tmp";
  const long fd = base::RawSyscall6(SYS_openat, AT_FDCWD, reinterpret_cast<long>(tmp.c_str()),
                                    O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0400);
  if (fd < 0) return fd;
  long rc = base::RawSyscall6(SYS_fallocate, fd, 0, 0, static_cast<long>(size));
  if (rc == -EOPNOTSUPP) rc = 0;  // (then a full disk shows in the writes)
  std::unique_ptr<uint8_t[]> buf(new (std::nothrow) uint8_t[io::kPieceBytes]);
  if (!buf && rc == 0) rc = -ENOMEM;
  for (uint64_t off = 0; rc == 0 && off < size;) {
    const ssize_t n = ReadMember(entry, off, buf.get(), io::kPieceBytes);
    if (n <= 0) {
      rc = n < 0 ? n : -EIO;
      break;
    }
    for (ssize_t w = 0; rc == 0 && w < n;) {
      const long k = base::RawSyscall6(SYS_pwrite64, fd, reinterpret_cast<long>(buf.get() + w),
                                       n - w, static_cast<long>(off + w));
      if (k < 0 && k != -EINTR) rc = k;
      w += k > 0 ? k : 0;
    }
    off += static_cast<uint64_t>(n);
  }
  // The read-only descriptor is opened before the rename: another process making room may
  // remove the name at any time after it.
  long ro_made = -1;
  if (rc == 0) {
    ro_made = base::RawSyscall6(SYS_openat, AT_FDCWD, reinterpret_cast<long>(tmp.c_str()),
                                O_RDONLY | O_CLOEXEC);
    rc = ro_made < 0 ? ro_made : 0;
  }
  if (rc == 0)
    rc = base::RawSyscall6(SYS_renameat, AT_FDCWD, reinterpret_cast<long>(tmp.c_str()), AT_FDCWD,
                           reinterpret_cast<long>(path.c_str()));
  base::RawSyscall6(SYS_close, fd);
  if (rc < 0) {
    if (ro_made >= 0) base::RawSyscall6(SYS_close, ro_made);
    base::RawSyscall6(SYS_unlinkat, AT_FDCWD, reinterpret_cast<long>(tmp.c_str()), 0);
    return rc;
  }
  return ro_made;
}

}  // namespace fanstore::runtime
