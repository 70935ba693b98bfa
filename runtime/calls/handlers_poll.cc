// Readiness of dataset fds: poll, ppoll, select, pselect6 and epoll_ctl.
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

#include "base/raw_syscall.h"
#include "base/syscall_numbers.h"
#include "runtime/calls/handlers.h"
#include "runtime/data/member_io.h"
#include "runtime/process/fd_table.h"
#include "runtime/process/state.h"

namespace fanstore::runtime {

using base::RawSyscall6;

// Readiness. A regular file or directory is always readable and writable (the kernel's
// DEFAULT_POLLMASK), while a placeholder would poll as POLLNVAL and select as EBADF; so
// virtual fds are answered here and taken out of what the kernel sees, and when one of
// them is ready the kernel is only asked for the others' state (a zero timeout), as the
// kernel itself returns at once when anything is ready.
namespace {
constexpr short kAlwaysReady = POLLIN | POLLOUT | POLLRDNORM | POLLWRNORM;
constexpr unsigned long kMaxPollFds = 4096;

// Where process_vm_readv/writev are refused (a seccomp profile without CAP_SYS_PTRACE, or
// qemu-user, which lacks them), the bytes go through a pipe instead: the kernel checks the
// program's pointer on the write (or read) into it, so a bad one is still EFAULT, not a
// crash. Non-blocking, a piece at a time: a pipe holds as little as one page (past the
// user's pipe-user-pages-soft), and a write that filled it must not wait for the read.
std::atomic<bool> s_no_vm_rw{false};

bool CopyThroughPipe(void* dst, const void* src, size_t len) {
  int p[2];
  if (RawSyscall6(SYS_pipe2, reinterpret_cast<long>(p), O_CLOEXEC | O_NONBLOCK) != 0) return false;
  bool ok = true;
  for (size_t done = 0; ok && done < len;) {
    const long w = RawSyscall6(SYS_write, p[1], reinterpret_cast<long>(src) + done, len - done);
    ok = w > 0;
    for (long got = 0; ok && got < w;) {
      const long r = RawSyscall6(SYS_read, p[0], reinterpret_cast<long>(dst) + done + got, w - got);
      ok = r > 0;
      if (ok) got += r;
    }
    if (ok) done += static_cast<size_t>(w);
  }
  RawSyscall6(SYS_close, p[0]);
  RawSyscall6(SYS_close, p[1]);
  return ok;
}

bool VmCopy(long nr, void* local_at, void* remote_at, size_t len) {
  if (!s_no_vm_rw.load(std::memory_order_relaxed)) {
    iovec local{local_at, len}, remote{remote_at, len};
    const long rc =
        RawSyscall6(nr, Get()->pid.load(std::memory_order_relaxed), reinterpret_cast<long>(&local),
                    1, reinterpret_cast<long>(&remote), 1, 0);
    if (rc != -ENOSYS && rc != -EPERM) return rc == static_cast<long>(len);
    s_no_vm_rw.store(true, std::memory_order_relaxed);
  }
  return nr == SYS_process_vm_readv ? CopyThroughPipe(local_at, remote_at, len)
                                    : CopyThroughPipe(remote_at, local_at, len);
}

}  // namespace

// The application's memory, copied as the kernel would (process_vm_readv/writev of this
// process): a bad or read-only pointer gives false, where a plain access would crash.
bool CopyIn(void* dst, long src, size_t len) {
  return VmCopy(SYS_process_vm_readv, dst, reinterpret_cast<void*>(src), len);
}
bool CopyOut(long dst, const void* src, size_t len) {
  return VmCopy(SYS_process_vm_writev, const_cast<void*>(src), reinterpret_cast<void*>(dst), len);
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
