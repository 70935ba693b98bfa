// The read side of a virtual fd: read/pread/readv, lseek, getdents64 and the copies
// (sendfile, copy_file_range, splice) whose source is virtual. Offsets live in the shared
// description (OpenFile::offset), so fds that share it after dup or fork move together.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "base/raw_syscall.h"
#include "base/syscall_numbers.h"
#include "runtime/calls/handlers.h"
#include "runtime/data/member_io.h"
#include "runtime/process/fd_table.h"
#include "runtime/process/state.h"

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
  OpenFile* f = Fds().Lookup(Args(nr, a).fd());
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
  OpenFile* f = Fds().Lookup(Args(SYS_lseek, a).fd());
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

HookResult OnGetdents(const long a[6]) {
  OpenFile* f = Fds().Lookup(Args(SYS_getdents64, a).fd());
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

}  // namespace fanstore::runtime
