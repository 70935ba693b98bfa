// mmap of dataset fds: raw members mapped from their blob with the bytes past their end
// made as the kernel makes a file's; compressed members through a sealed memfd copy.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "base/page_size.h"
#include "base/raw_syscall.h"
#include "base/syscall_numbers.h"
#include "runtime/calls/handlers.h"
#include "runtime/data/member_io.h"
#include "runtime/data/member_source.h"
#include "runtime/process/fd_table.h"
#include "runtime/process/state.h"

namespace fanstore::runtime {

using base::RawSyscall6;

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

// A member mapped from its blob would show, past its end, the blob's next bytes (another
// member's, or the index) where the kernel shows a file's last page zero-filled and
// raises SIGBUS on the pages after it. So, in the mapping at `addr` made for mmap
// arguments `a`: the member's last partial page is replaced by an anonymous page holding
// its bytes and zeros, and whole pages past its end by a mapping of an empty memfd (SIGBUS
// on access, as for a file). 0, or -errno.
long MaskPastEnd(long addr, const long a[6], uint32_t entry, uint64_t size) {
  const uint64_t page = base::PageSize();
  const uint64_t off = static_cast<uint64_t>(a[5]);
  const uint64_t map_end = off + (static_cast<uint64_t>(a[1]) + page - 1) / page * page;
  const uint64_t last = size / page * page;  // the start of the partial last page
  const uint64_t past = (size + page - 1) / page * page;
  if (size % page != 0 && last >= off && last < map_end) {
    // An anonymous page (zeros) in its place, the member's last bytes read into it.
    const size_t n = static_cast<size_t>(size - last);
    const long at = addr + static_cast<long>(last - off);
    const long m = RawSyscall6(SYS_mmap, at, static_cast<long>(page), PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_FIXED | MAP_ANONYMOUS, -1, 0);
    if (m != at) return m < 0 ? m : -ENOMEM;
    if (ReadMember(entry, last, reinterpret_cast<void*>(at), n) != static_cast<ssize_t>(n))
      return -EIO;
    if (const long rc = RawSyscall6(SYS_mprotect, at, static_cast<long>(page), a[2]); rc < 0)
      return rc;
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
  OpenFile* f = Fds().Lookup(Args(SYS_mmap, a).fd());
  if (!f) return kPassToKernel;
  if (IsDirEntry(f->entry)) return Err(ENODEV);
  if ((a[3] & MAP_SHARED) && (a[2] & PROT_WRITE)) return Err(EACCES);
  const meta::ImageEntry& e = Get()->ns.entry(f->entry);
  // (raw members under a block are packed tight, off page boundaries: a memfd copy; so is
  // a large member held elsewhere, made from its pieces rather than fetched whole)
  const uint64_t page = base::PageSize();
  if (meta::StoredRaw(e.codec) && meta::AlignedRaw(e.size) &&
      e.data_offset % meta::kBlockAlign == 0 && a[5] % static_cast<long>(page) == 0 &&
      !FetchedByPiece(f->entry)) {
    // (the mapping's pages come straight from the blob: the member is checked first)
    if (const long rc =
            CheckRawMember(f->entry, static_cast<uint64_t>(a[5]), static_cast<uint64_t>(a[1]));
        rc < 0)
      return Handled(rc);
    MemberSource src;
    if (const long rc = MemberSource::Open(f->entry, /*want_fd=*/true, &src); rc < 0)
      return Handled(rc);
    // Map the blob (or the agent's private copy) at the member's data, when it starts on a
    // page (its 4 KiB alignment is not a 16 or 64 KiB page's: then the memfd copy below);
    // private so nothing can write it. The mapping keeps a fetched copy alive after the close.
    if ((src.base() + static_cast<uint64_t>(a[5])) % page != 0) {
      src = MemberSource();
      if (const long rc = UpgradeToMemfd(a[4])) return Handled(rc);
      return kPassToKernel;  // fd is a sealed memfd now
    }
    const long flags = (a[3] & ~MAP_SHARED) | MAP_PRIVATE;
    const long rc = RawSyscall6(SYS_mmap, a[0], a[1], a[2], flags, src.fd(),
                                static_cast<long>(src.base()) + a[5]);
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

}  // namespace fanstore::runtime
