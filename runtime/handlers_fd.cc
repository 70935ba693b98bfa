#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "base/raw_syscall.h"
#include "base/syscall_numbers.h"
#include "meta/format.h"
#include "runtime/fd_table.h"
#include "runtime/handlers.h"
#include "runtime/member_io.h"
#include "runtime/prefilter_state.h"
#include "runtime/state.h"

namespace fanstore::runtime {

using base::RawSyscall6;

namespace {

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

}  // namespace fanstore::runtime
