#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "intercept/raw_syscall.h"
#include "intercept/syscall_numbers.h"
#include "meta/format.h"
#include "runtime/fd_table.h"
#include "runtime/handlers.h"
#include "runtime/member_io.h"
#include "runtime/prefilter_state.h"
#include "runtime/state.h"

namespace fanstore::runtime {

using intercept::RawSyscall6;

namespace {

HookResult Err(int e) {
  return Handled(-e);
}
const meta::ImageEntry& EntryOf(const OpenFile& f) {
  return Get()->ns.entry(f.entry);
}

// Reads at the description's offset and advances it (atomic with respect to other reads).
long ReadAtOffset(OpenFile& f, void* buf, size_t len) {
  for (;;) {
    int64_t off = f.offset.load(std::memory_order_acquire);
    const long n = ReadMember(f.entry, static_cast<uint64_t>(off), buf, len);
    if (n <= 0) return n;
    if (f.offset.compare_exchange_strong(off, off + n, std::memory_order_acq_rel)) return n;
  }
}

long CheckReadable(const OpenFile& f) {
  if (f.flags.load(std::memory_order_relaxed) & O_PATH) return -EBADF;
  if (IsDirEntry(f.entry)) return -EISDIR;
  return 0;
}

long ReadVec(OpenFile& f, const iovec* iov, long cnt, int64_t pos) {
  long total = 0;
  for (long i = 0; i < cnt; ++i) {
    long n;
    if (pos < 0) {
      n = ReadAtOffset(f, iov[i].iov_base, iov[i].iov_len);
    } else {
      n = ReadMember(f.entry, static_cast<uint64_t>(pos + total), iov[i].iov_base, iov[i].iov_len);
    }
    if (n < 0) return total > 0 ? total : n;
    total += n;
    if (static_cast<size_t>(n) < iov[i].iov_len) break;
  }
  return total;
}

}  // namespace

HookResult OnRead(long nr, const long a[6]) {
  OpenFile* f = Fds().Lookup(a[0]);
  if (!f) return kPassToKernel;
  if (const long e = CheckReadable(*f)) return Handled(e);
  switch (nr) {
    case SYS_read:
      return Handled(ReadAtOffset(*f, reinterpret_cast<void*>(a[1]), static_cast<size_t>(a[2])));
    case SYS_pread64:
      if (a[3] < 0) return Err(EINVAL);
      return Handled(ReadMember(f->entry, static_cast<uint64_t>(a[3]),
                                reinterpret_cast<void*>(a[1]), static_cast<size_t>(a[2])));
    case SYS_readv:
      return Handled(ReadVec(*f, reinterpret_cast<const iovec*>(a[1]), a[2], -1));
    case SYS_preadv:
      if (a[3] < 0) return Err(EINVAL);
      return Handled(ReadVec(*f, reinterpret_cast<const iovec*>(a[1]), a[2], a[3]));
    case SYS_preadv2:
      if (a[3] < -1) return Err(EINVAL);
      return Handled(ReadVec(*f, reinterpret_cast<const iovec*>(a[1]), a[2], a[3]));
    default:
      return kPassToKernel;
  }
}

HookResult OnLseek(const long a[6]) {
  OpenFile* f = Fds().Lookup(a[0]);
  if (!f) return kPassToKernel;
  if (f->flags.load() & O_PATH) return Err(EBADF);
  const int64_t size = static_cast<int64_t>(EntryOf(*f).size);
  const int64_t off = a[1];
  int64_t next;
  if (IsDirEntry(f->entry)) {  // directories: only rewinding and telldir positions
    if (a[2] == SEEK_SET && off >= 0)
      next = off;
    else if (a[2] == SEEK_CUR && off == 0)
      return Handled(f->offset.load());
    else
      return Err(EINVAL);
    f->offset.store(next);
    return Handled(next);
  }
  switch (a[2]) {
    case SEEK_SET:
      next = off;
      break;
    case SEEK_CUR:
      next = f->offset.load() + off;
      break;
    case SEEK_END:
      next = size + off;
      break;
    case SEEK_DATA:
      if (off < 0 || off >= size) return Err(ENXIO);
      next = off;
      break;
    case SEEK_HOLE:
      if (off < 0 || off >= size) return Err(ENXIO);
      next = size;
      break;
    default:
      return Err(EINVAL);
  }
  if (next < 0) return Err(EINVAL);
  f->offset.store(next);
  return Handled(next);
}

HookResult OnClose(const long a[6]) {
  State* s = Get();
  // the runtime's own fds, and parked ones (closed already, to the application)
  if (s->IsReservedFd(a[0]) || Fds().IsParked(a[0])) return Err(EBADF);
  if (!Fds().Lookup(a[0])) return kPassToKernel;
  if (s->InVforkChild()) return kPassToKernel;  // (its fd table is its own; the memory is not)
  const int fd = static_cast<int>(a[0]);
  const bool parkable = Fds().CloexecSure(fd);
  Fds().Unbind(fd);
  if (parkable && Fds().Park(fd)) return Handled(0);  // the placeholder stays, for the next open
  NoteFdFreed(fd);
  return kPassToKernel;  // the kernel closes the placeholder
}

HookResult OnCloseRange(const long a[6]) {
  State* s = Get();
  unsigned long first = static_cast<unsigned long>(a[0]);
  unsigned long last = static_cast<unsigned long>(a[1]);
  if (first > last) return Err(EINVAL);
  if (!(a[2] & CLOSE_RANGE_CLOEXEC) && !s->InVforkChild()) {
    for (unsigned long fd = first; fd <= last && fd < static_cast<unsigned long>(kMaxFds); ++fd) {
      if (Fds().DescOf(static_cast<long>(fd)) >= 0) Fds().Unbind(static_cast<int>(fd));
      Fds().Unpark(static_cast<int>(fd));  // (the kernel closes its placeholder)
    }
    NoteFdFreed(static_cast<long>(std::min<unsigned long>(first, kMaxFds)));
  }
  if (s->reserved_lo > 0 && last >= static_cast<unsigned long>(s->reserved_lo)) {
    if (first >= static_cast<unsigned long>(s->reserved_lo)) return Handled(0);
    last = static_cast<unsigned long>(s->reserved_lo - 1);
  }
  return Handled(
      RawSyscall6(SYS_close_range, static_cast<long>(first), static_cast<long>(last), a[2]));
}

HookResult OnDup(long nr, const long a[6]) {
  State* s = Get();
  const long old = a[0];
  const int d = Fds().DescOf(old);
  if (nr == SYS_dup) {
    if (d < 0) return kPassToKernel;
    const long fd = RawSyscall6(SYS_dup, old);
    if (fd >= 0) Fds().Bind(static_cast<int>(fd), d);
    return Handled(fd);
  }
  const long target = a[1];
  if (s->IsReservedFd(target) || s->IsReservedFd(old) || Fds().IsParked(old)) return Err(EBADF);
  // onto a parked fd: free to the application, so the placeholder is taken back first
  if (Fds().IsParked(target) && !s->InVforkChild()) Fds().Unpark(static_cast<int>(target));
  if (d < 0 && Fds().DescOf(target) < 0) return kPassToKernel;
  if (nr == SYS_dup2 && old == target)
    return Handled(RawSyscall6(SYS_fcntl, old, F_GETFD) < 0 ? -EBADF : target);
  const long fd = RawSyscall6(nr, old, target, a[2]);
  if (fd < 0 || s->InVforkChild()) return Handled(fd);
  if (d >= 0)
    Fds().Bind(static_cast<int>(fd), d);
  else
    Fds().Unbind(static_cast<int>(fd));
  return Handled(fd);
}

HookResult OnFcntl(const long a[6]) {
  OpenFile* f = Fds().Lookup(a[0]);
  if (!f) {
    if (Get()->IsReservedFd(a[0]) || Fds().IsParked(a[0])) return Err(EBADF);
    return kPassToKernel;
  }
  const int cmd = static_cast<int>(a[1]);
  switch (cmd) {
    case F_DUPFD:
    case F_DUPFD_CLOEXEC: {
      const long fd = RawSyscall6(SYS_fcntl, a[0], cmd, a[2]);
      if (fd >= 0 && !Get()->InVforkChild()) Fds().Bind(static_cast<int>(fd), Fds().DescOf(a[0]));
      return Handled(fd);
    }
    case F_GETFL:
      return Handled((f->flags.load() & ~(O_CREAT | O_EXCL | O_NOCTTY | O_TRUNC | O_CLOEXEC)) |
                     O_LARGEFILE);
    case F_SETFL: {
      const int settable = O_APPEND | O_NONBLOCK | O_ASYNC | O_DIRECT | O_NOATIME;
      int v = f->flags.load();
      f->flags.store((v & ~settable) | (static_cast<int>(a[2]) & settable));
      return Handled(0);
    }
    case F_GETFD:
      return kPassToKernel;  // the placeholder carries FD_CLOEXEC
    case F_SETFD: {
      const long rc = RawSyscall6(SYS_fcntl, a[0], F_SETFD, a[2]);
      if (rc == 0 && !Get()->InVforkChild())
        Fds().SetCloexecSure(static_cast<int>(a[0]), a[2] & FD_CLOEXEC);
      return Handled(rc);
    }
    case F_GETLK:
    case F_SETLK:
    case F_SETLKW:
    case F_OFD_GETLK:
    case F_OFD_SETLK:
    case F_OFD_SETLKW: {
      auto* fl = reinterpret_cast<struct flock*>(a[2]);
      if (cmd == F_GETLK || cmd == F_OFD_GETLK) {
        fl->l_type = F_UNLCK;
        return Handled(0);
      }
      return Handled(fl->l_type == F_WRLCK ? -EBADF : 0);  // read locks on read-only data
    }
    default:
      return Err(EINVAL);
  }
}

HookResult OnIoctl(const long a[6]) {
  const unsigned long req = static_cast<unsigned long>(a[1]);
  if (req == FICLONE && Fds().Lookup(a[2])) return Err(EXDEV);  // cp falls back to copying
  if (req == FICLONERANGE) {
    const auto* r = reinterpret_cast<const file_clone_range*>(a[2]);
    if (r && Fds().Lookup(r->src_fd)) return Err(EXDEV);
  }
  OpenFile* f = Fds().Lookup(a[0]);
  if (!f) return kPassToKernel;
  if (req == FIOCLEX || req == FIONCLEX) {  // the placeholder (O_PATH: no ioctl) carries it
    const long rc = RawSyscall6(SYS_fcntl, a[0], F_SETFD, req == FIOCLEX ? FD_CLOEXEC : 0);
    if (rc == 0 && !Get()->InVforkChild())
      Fds().SetCloexecSure(static_cast<int>(a[0]), req == FIOCLEX);
    return Handled(rc);
  }
  if (req == FIONREAD && !IsDirEntry(f->entry)) {
    const int64_t left = static_cast<int64_t>(EntryOf(*f).size) - f->offset.load();
    *reinterpret_cast<int*>(a[2]) = static_cast<int>(left > 0 ? left : 0);
    return Handled(0);
  }
  return Err(ENOTTY);
}

HookResult OnGetdents(const long a[6]) {
  OpenFile* f = Fds().Lookup(a[0]);
  if (!f) return kPassToKernel;
  const State& s = *Get();
  if (!IsDirEntry(f->entry)) return Err(ENOTDIR);
  const meta::ImageEntry& d = s.ns.entry(f->entry);
  char* out = reinterpret_cast<char*>(a[1]);
  const size_t cap = static_cast<size_t>(a[2]);
  size_t used = 0;
  int64_t pos = f->offset.load();
  const int64_t total = 2 + static_cast<int64_t>(d.child_count);
  for (; pos < total; ++pos) {
    uint32_t idx;
    std::string_view name;
    if (pos == 0) {
      idx = f->entry;
      name = ".";
    } else if (pos == 1) {
      idx = d.parent;
      name = "..";
    } else {
      idx = s.ns.Child(d, static_cast<uint32_t>(pos - 2));
      name = s.ns.name(s.ns.entry(idx));
    }
    const size_t reclen = (19 + name.size() + 1 + 7) & ~size_t{7};
    if (used + reclen > cap) {
      if (used == 0) return Err(EINVAL);
      break;
    }
    char* rec = out + used;
    const uint64_t ino = idx + 1;
    const int64_t next = pos + 1;
    const uint16_t rl = static_cast<uint16_t>(reclen);
    const uint32_t mode = s.ns.entry(idx).mode;
    const uint8_t type = S_ISDIR(mode) ? DT_DIR : S_ISLNK(mode) ? DT_LNK : DT_REG;
    std::memcpy(rec, &ino, 8);
    std::memcpy(rec + 8, &next, 8);
    std::memcpy(rec + 16, &rl, 2);
    rec[18] = static_cast<char>(type);
    std::memcpy(rec + 19, name.data(), name.size());
    std::memset(rec + 19 + name.size(), 0, reclen - 19 - name.size());
    used += reclen;
  }
  f->offset.store(pos);
  return Handled(static_cast<long>(used));
}

HookResult OnFstat(const long a[6]) {
  OpenFile* f = Fds().Lookup(a[0]);
  if (!f) return kPassToKernel;
  FillStat(f->entry, reinterpret_cast<struct stat*>(a[1]));
  return Handled(0);
}

// A sealed memfd holding entry `entry`'s bytes, or -errno. `cloexec` = false keeps it
// across exec (a script's interpreter opens it as /dev/fd/N).
long MemfdOf(uint32_t entry, bool cloexec) {
  const meta::ImageEntry& e = Get()->ns.entry(entry);
  const long mfd = RawSyscall6(SYS_memfd_create, reinterpret_cast<long>("fanstore"),
                               (cloexec ? MFD_CLOEXEC : 0) | MFD_ALLOW_SEALING);
  if (mfd < 0) return mfd;
  std::vector<char> buf(1 << 20);
  for (uint64_t off = 0; off < e.size;) {
    const long n = ReadMember(entry, off, buf.data(), buf.size());
    if (n <= 0) {
      RawSyscall6(SYS_close, mfd);
      return n < 0 ? n : -EIO;
    }
    for (long w = 0; w < n;) {
      const long k = RawSyscall6(SYS_write, mfd, reinterpret_cast<long>(buf.data() + w), n - w);
      if (k < 0) {
        RawSyscall6(SYS_close, mfd);
        return k;
      }
      w += k;
    }
    off += static_cast<uint64_t>(n);
  }
  RawSyscall6(SYS_fcntl, mfd, F_ADD_SEALS,
              F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL);
  return mfd;
}

long UpgradeToMemfd(long fd) {
  OpenFile* f = Fds().Lookup(fd);
  if (!f) return -EBADF;
  const long mfd = MemfdOf(f->entry, true);
  if (mfd < 0) return mfd;
  RawSyscall6(SYS_lseek, mfd, f->offset.load(), SEEK_SET);
  const long cloexec = RawSyscall6(SYS_fcntl, fd, F_GETFD);
  const long rc =
      RawSyscall6(SYS_dup3, mfd, fd, (cloexec > 0 && (cloexec & FD_CLOEXEC)) ? O_CLOEXEC : 0);
  RawSyscall6(SYS_close, mfd);
  if (rc < 0) return rc;
  Fds().Unbind(static_cast<int>(fd));  // now a real file descriptor
  return 0;
}

namespace {

constexpr uint64_t kPage = 4096;

// A member mapped from its blob would show, past its end, the blob's next bytes (another
// member's, or the index) where the kernel shows a file's last page zero-filled and
// raises SIGBUS on the pages after it. So, in the mapping at `addr` made for mmap
// arguments `a`: the member's last partial page is replaced by an anonymous page holding
// its bytes and zeros, and whole pages past its end by a mapping of an empty memfd (SIGBUS
// on access, as for a file). 0, or -errno.
long MaskPastEnd(long addr, const long a[6], uint32_t entry, uint64_t size) {
  const uint64_t off = static_cast<uint64_t>(a[5]);
  const uint64_t map_end = off + (static_cast<uint64_t>(a[1]) + kPage - 1) / kPage * kPage;
  const uint64_t last = size / kPage * kPage;  // the start of the partial last page
  const uint64_t past = (size + kPage - 1) / kPage * kPage;
  if (size % kPage != 0 && last >= off && last < map_end) {
    alignas(16) char page[kPage] = {};
    const size_t n = static_cast<size_t>(size - last);
    if (ReadMember(entry, last, page, n) != static_cast<ssize_t>(n)) return -EIO;
    const long at = addr + static_cast<long>(last - off);
    const long m = RawSyscall6(SYS_mmap, at, kPage, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_FIXED | MAP_ANONYMOUS, -1, 0);
    if (m != at) return m < 0 ? m : -ENOMEM;
    std::memcpy(reinterpret_cast<void*>(at), page, kPage);
    if (const long rc = RawSyscall6(SYS_mprotect, at, kPage, a[2]); rc < 0) return rc;
  }
  const uint64_t from = std::max(past, off);
  if (from < map_end) {
    const long empty =
        RawSyscall6(SYS_memfd_create, reinterpret_cast<long>("fanstore-past-end"), MFD_CLOEXEC);
    if (empty < 0) return empty;
    const long at = addr + static_cast<long>(from - off);
    const long m = RawSyscall6(SYS_mmap, at, static_cast<long>(map_end - from), a[2],
                               MAP_PRIVATE | MAP_FIXED, empty, 0);
    RawSyscall6(SYS_close, empty);
    if (m != at) return m < 0 ? m : -ENOMEM;
  }
  return 0;
}

}  // namespace

HookResult OnMmap(const long a[6]) {
  // mmap(addr, len, prot, flags, fd, off)
  if (a[3] & MAP_ANONYMOUS) return kPassToKernel;
  OpenFile* f = Fds().Lookup(a[4]);
  if (!f) return kPassToKernel;
  if (IsDirEntry(f->entry)) return Err(ENODEV);
  if ((a[3] & MAP_SHARED) && (a[2] & PROT_WRITE)) return Err(EACCES);
  const meta::ImageEntry& e = EntryOf(*f);
  // (raw members under a block are packed tight, off page boundaries: a memfd copy; so is
  // a large member held elsewhere, made from its pieces rather than fetched whole)
  if (e.codec == static_cast<uint8_t>(meta::Codec::kRaw) && meta::AlignedRaw(e.size) &&
      e.data_offset % meta::kBlockAlign == 0 && (a[5] & 4095) == 0 && !FetchedByPiece(f->entry)) {
    MemberSource src;
    if (const long rc = OpenSource(f->entry, &src, /*want_fd=*/true); rc < 0) return Handled(rc);
    // Map the blob (or the agent's private copy) at the member's 4 KiB-aligned data; private
    // so nothing can write it. The mapping keeps a fetched copy alive after the close.
    const long flags = (a[3] & ~MAP_SHARED) | MAP_PRIVATE;
    const long rc =
        RawSyscall6(SYS_mmap, a[0], a[1], a[2], flags, src.fd, static_cast<long>(src.base) + a[5]);
    CloseSource(src);
    if (static_cast<unsigned long>(rc) >= static_cast<unsigned long>(-4095)) return Handled(rc);
    if (const long err = MaskPastEnd(rc, a, f->entry, e.size); err < 0) {
      RawSyscall6(SYS_munmap, rc, a[1]);
      return Handled(err);
    }
    return Handled(rc);
  }
  // A large member held elsewhere: the node's shared copy, made from its pieces (the file
  // ends where the member does, so the kernel zero-fills its last page and raises SIGBUS
  // past it). Without room for one on the node, a private copy as for the others.
  if (FetchedByPiece(f->entry)) {
    if (const long fd = SharedCopyOf(f->entry); fd >= 0) {
      const long flags = (a[3] & ~MAP_SHARED) | MAP_PRIVATE;
      const long rc = RawSyscall6(SYS_mmap, a[0], a[1], a[2], flags, fd, a[5]);
      RawSyscall6(SYS_close, fd);
      return Handled(rc);
    }
  }
  if (const long rc = UpgradeToMemfd(a[4])) return Handled(rc);
  return kPassToKernel;  // fd is a sealed memfd now
}

HookResult OnCopy(long nr, const long a[6]) {
  // sendfile(out, in, off*, count)  copy_file_range(in, off_in*, out, off_out*, len, flags)
  // splice(in, off_in*, out, off_out*, len, flags): emulated when the source is virtual.
  long in, out;
  int64_t* in_off;
  int64_t* out_off = nullptr;
  size_t len;
  if (nr == SYS_sendfile) {
    out = a[0];
    in = a[1];
    in_off = reinterpret_cast<int64_t*>(a[2]);
    len = static_cast<size_t>(a[3]);
  } else {
    in = a[0];
    in_off = reinterpret_cast<int64_t*>(a[1]);
    out = a[2];
    out_off = reinterpret_cast<int64_t*>(a[3]);
    len = static_cast<size_t>(a[4]);
  }
  if (Fds().Lookup(out)) return Err(EBADF);  // nothing in the dataset is writable
  OpenFile* f = Fds().Lookup(in);
  if (!f) return kPassToKernel;
  if (IsDirEntry(f->entry)) return Err(EISDIR);
  char buf[64 * 1024];
  size_t done = 0;
  while (done < len) {
    const size_t want = std::min(len - done, sizeof buf);
    long n;
    if (in_off)
      n = ReadMember(f->entry, static_cast<uint64_t>(*in_off), buf, want);
    else
      n = ReadAtOffset(*f, buf, want);
    if (n < 0) return Handled(done ? static_cast<long>(done) : n);
    if (n == 0) break;
    long w = 0;
    while (w < n) {
      const long k =
          out_off ? RawSyscall6(SYS_pwrite64, out, reinterpret_cast<long>(buf + w), n - w, *out_off)
                  : RawSyscall6(SYS_write, out, reinterpret_cast<long>(buf + w), n - w);
      if (k < 0) return Handled(done ? static_cast<long>(done) : k);
      w += k;
      if (out_off) *out_off += k;
    }
    if (in_off) *in_off += n;
    done += static_cast<size_t>(n);
  }
  return Handled(static_cast<long>(done));
}

HookResult OnFdMisc(long nr, const long a[6]) {
  OpenFile* f = Fds().Lookup(a[0]);
  if (!f) return kPassToKernel;
  switch (nr) {
    case SYS_fadvise64:
    case SYS_readahead:
    case SYS_fsync:
    case SYS_fdatasync:
    case SYS_syncfs:
      return Handled(0);
    case SYS_flock: {
      // Granted at once, shared or exclusive: the data never changes, so a lock has nothing
      // to protect (HDF5 takes one on every file it opens). LOCK_MAND is accepted and
      // ignored, as Linux does since 5.15.
      const long op = a[1];
      if (op & 32 /* LOCK_MAND */) return Handled(0);
      const long type = op & ~long{LOCK_NB};
      return Handled(type == LOCK_SH || type == LOCK_EX || type == LOCK_UN ? 0 : -EINVAL);
    }
    case SYS_sync_file_range: {  // (fd, offset, nbytes, flags): nothing is ever dirty
      const unsigned long valid =
          SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER;
      const long off = a[1], end = static_cast<long>(static_cast<unsigned long>(a[1]) +
                                                     static_cast<unsigned long>(a[2]));
      if ((static_cast<unsigned long>(a[3]) & ~valid) || off < 0 || end < 0 || end < off)
        return Err(EINVAL);
      return Handled(0);
    }
    case SYS_fgetxattr:
      return Err(ENODATA);
    case SYS_flistxattr:
      return Handled(0);
    case SYS_ftruncate:
      return Err(EINVAL);  // not open for writing
    case SYS_write:
    case SYS_pwrite64:
    case SYS_writev:
    case SYS_pwritev:
    case SYS_pwritev2:
      return Err(EBADF);
    default:  // fchmod, fchown, fsetxattr, fremovexattr
      return Err(EROFS);
  }
}

// Readiness. A regular file or directory is always readable and writable (the kernel's
// DEFAULT_POLLMASK), while a placeholder would poll as POLLNVAL and select as EBADF; so
// virtual fds are answered here and taken out of what the kernel sees, and when one of
// them is ready the kernel is only asked for the others' state (a zero timeout), as the
// kernel itself returns at once when anything is ready.
namespace {
constexpr short kAlwaysReady = POLLIN | POLLOUT | POLLRDNORM | POLLWRNORM;
constexpr unsigned long kMaxPollFds = 4096;
}  // namespace

// The application's memory, copied as the kernel would (process_vm_readv/writev of this
// process): a bad or read-only pointer gives false, where a plain access would crash.
bool CopyIn(void* dst, long src, size_t len) {
  iovec local{dst, len}, remote{reinterpret_cast<void*>(src), len};
  return RawSyscall6(SYS_process_vm_readv, Get()->pid.load(std::memory_order_relaxed),
                     reinterpret_cast<long>(&local), 1, reinterpret_cast<long>(&remote), 1,
                     0) == static_cast<long>(len);
}
bool CopyOut(long dst, const void* src, size_t len) {
  iovec local{const_cast<void*>(src), len}, remote{reinterpret_cast<void*>(dst), len};
  return RawSyscall6(SYS_process_vm_writev, Get()->pid.load(std::memory_order_relaxed),
                     reinterpret_cast<long>(&local), 1, reinterpret_cast<long>(&remote), 1,
                     0) == static_cast<long>(len);
}

HookResult OnPoll(long nr, const long a[6]) {
  // poll(fds, nfds, timeout_ms)  ppoll(fds, nfds, tsp, sigmask, sigsetsize)
  const unsigned long n = static_cast<unsigned long>(a[1]);
  if (!a[0] || n == 0 || n > kMaxPollFds) return kPassToKernel;
  pollfd user[kMaxPollFds];  // the application's array, as it was
  if (!CopyIn(user, a[0], n * sizeof(pollfd))) return kPassToKernel;  // the kernel says EFAULT
  pollfd copy[kMaxPollFds];
  short virt[kMaxPollFds];  // the answer for a virtual fd, -1 for the others
  bool any = false;
  long ready = 0;
  for (unsigned long i = 0; i < n; ++i) {
    copy[i] = user[i];
    virt[i] = -1;
    if (user[i].fd < 0 || Fds().DescOf(user[i].fd) < 0) continue;
    any = true;
    virt[i] = static_cast<short>(kAlwaysReady & (user[i].events | POLLERR | POLLHUP));
    ready += virt[i] != 0;
    copy[i].fd = -1;  // ignored by the kernel
  }
  if (!any) return kPassToKernel;
  long rc;
  if (nr == SYS_poll) {
    rc = RawSyscall6(SYS_poll, reinterpret_cast<long>(copy), a[1], ready ? 0 : a[2]);
  } else {
    timespec zero{0, 0};
    rc = RawSyscall6(SYS_ppoll, reinterpret_cast<long>(copy), a[1],
                     ready ? reinterpret_cast<long>(&zero) : a[2], a[3], a[4]);
  }
  if (rc < 0 && !(ready && rc == -EINTR)) return Handled(rc);  // ready fds win over signals
  long count = 0;
  for (unsigned long i = 0; i < n; ++i) {
    user[i].revents = virt[i] >= 0 ? virt[i] : (rc < 0 ? 0 : copy[i].revents);
    count += user[i].revents != 0;
  }
  if (!CopyOut(a[0], user, n * sizeof(pollfd))) return Err(EFAULT);
  return Handled(count);
}

HookResult OnSelect(long nr, const long a[6]) {
  // select(nfds, r, w, e, timeval)  pselect6(nfds, r, w, e, timespec, {sigmask, size})
  const long nfds = static_cast<int>(a[0]);
  if (nfds <= 0 || nfds > kMaxFds) return kPassToKernel;
  const long words = (nfds + 63) / 64;
  uint64_t user[3][kMaxFds / 64];  // the application's sets, copied in safely
  uint64_t* sets[3] = {nullptr, nullptr, nullptr};
  for (int k = 0; k < 3; ++k) {
    if (!a[k + 1]) continue;
    if (!CopyIn(user[k], a[k + 1], static_cast<size_t>(words) * 8)) return kPassToKernel;  // EFAULT
    sets[k] = user[k];
  }
  uint64_t copy[3][kMaxFds / 64];
  uint64_t virt[2][kMaxFds / 64];  // virtual fds asked for reading, writing: ready
  bool any = false;
  long ready = 0;
  const std::atomic<uint64_t>* bits = Fds().bits();
  for (long w = 0; w < words; ++w) {
    uint64_t mask = ~uint64_t{0};
    if (w == words - 1 && nfds % 64) mask = (uint64_t{1} << (nfds % 64)) - 1;
    const uint64_t vbits = bits[w].load(std::memory_order_acquire) & mask;
    for (int k = 0; k < 3; ++k) {
      const uint64_t asked = sets[k] ? sets[k][w] : 0;
      any |= (asked & vbits) != 0;
      copy[k][w] = asked & ~vbits;
      if (k < 2) {
        virt[k][w] = asked & vbits;
        ready += __builtin_popcountll(virt[k][w]);
      }
    }
  }
  if (!any) return kPassToKernel;
  long* c[3];
  for (int k = 0; k < 3; ++k) c[k] = sets[k] ? reinterpret_cast<long*>(copy[k]) : nullptr;
  long rc;
  if (nr == SYS_select) {
    timeval zero{0, 0};
    rc = RawSyscall6(SYS_select, nfds, reinterpret_cast<long>(c[0]), reinterpret_cast<long>(c[1]),
                     reinterpret_cast<long>(c[2]), ready ? reinterpret_cast<long>(&zero) : a[4]);
  } else {
    timespec zero{0, 0};
    rc = RawSyscall6(SYS_pselect6, nfds, reinterpret_cast<long>(c[0]), reinterpret_cast<long>(c[1]),
                     reinterpret_cast<long>(c[2]), ready ? reinterpret_cast<long>(&zero) : a[4],
                     a[5]);
  }
  if (rc < 0 && !(ready && rc == -EINTR)) return Handled(rc);
  for (long w = 0; w < words; ++w) {
    for (int k = 0; k < 3; ++k) {
      if (!sets[k]) continue;
      sets[k][w] = (rc < 0 ? 0 : copy[k][w]) | (k < 2 ? virt[k][w] : 0);
    }
  }
  for (int k = 0; k < 3; ++k)
    if (sets[k] && !CopyOut(a[k + 1], sets[k], static_cast<size_t>(words) * 8)) return Err(EFAULT);
  return Handled((rc < 0 ? 0 : rc) + ready);
}

HookResult OnEpollCtl(const long a[6]) {
  // epoll_ctl(epfd, op, fd, event): a regular file cannot be watched (EPERM), nor be the
  // epoll instance (EINVAL, after the target's own checks).
  const bool virtual_target = Fds().DescOf(a[2]) >= 0;
  const bool virtual_epfd = Fds().DescOf(a[0]) >= 0;
  if (!virtual_target && !virtual_epfd) return kPassToKernel;
  if (!virtual_epfd && RawSyscall6(SYS_fcntl, a[0], F_GETFD) < 0) return Err(EBADF);
  if (virtual_target) return Err(EPERM);
  struct stat st;
  if (RawSyscall6(SYS_fstat, a[2], reinterpret_cast<long>(&st)) < 0) return Err(EBADF);
  return Err(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode) ? EPERM : EINVAL);
}

}  // namespace fanstore::runtime
