#include "intercept/thread_park.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

#include "base/raw_syscall.h"

namespace fanstore::intercept {

using base::RawSyscall6;

namespace {

constexpr int kMaxParked = 4096;
constexpr long kWaitNs = 2'000'000'000;  // for every thread to stop

// Written by the handlers while the constructor waits; read by it once they are all in.
std::atomic<int> g_slots{0};    // slots taken
std::atomic<int> g_parked{0};   // slots filled
std::atomic<uint32_t> g_go{0};  // the futex word: 1 once the threads may go on
std::atomic<long> g_self_pid{0};
uint64_t* g_pcs[kMaxParked];
long g_tids[kMaxParked];
struct sigaction g_old_action;
bool g_all_stopped = false;  // every signal was taken: the old action may come back

// SIGRTMAX, unless it cannot be sent to a thread here (qemu-user keeps the top real-time
// signals for itself): then the next one below.
int g_park_signal = 0;
int ParkSignal() {
  return g_park_signal ? g_park_signal : SIGRTMAX;
}

// Only raw system calls and atomics: the handler runs while libc's text is not executable.
void OnPark(int sig, siginfo_t* info, void* context) {
  const long pid = g_self_pid.load(std::memory_order_relaxed);
  if (info->si_code != SI_TKILL || info->si_pid != pid) {
    // Not ours: what the program had installed for this signal, if it was a handler.
    if (g_old_action.sa_flags & SA_SIGINFO) {
      if (g_old_action.sa_sigaction) g_old_action.sa_sigaction(sig, info, context);
    } else if (g_old_action.sa_handler != SIG_DFL && g_old_action.sa_handler != SIG_IGN) {
      g_old_action.sa_handler(sig);
    }
    return;
  }
  if (g_go.load(std::memory_order_acquire)) return;  // late: the patching is over
  const int slot = g_slots.fetch_add(1, std::memory_order_relaxed);
  if (slot < kMaxParked) {
    auto* uc = static_cast<ucontext_t*>(context);
#if defined(__x86_64__)
    g_pcs[slot] = reinterpret_cast<uint64_t*>(&uc->uc_mcontext.gregs[REG_RIP]);
#else
    g_pcs[slot] = reinterpret_cast<uint64_t*>(&uc->uc_mcontext.pc);
#endif
    g_tids[slot] = RawSyscall6(SYS_gettid);
  }
  g_parked.fetch_add(1, std::memory_order_release);
  while (!g_go.load(std::memory_order_acquire))
    RawSyscall6(SYS_futex, reinterpret_cast<long>(&g_go), FUTEX_WAIT_PRIVATE, 0, 0);
}

// The process's thread ids, from /proc/self/task; empty if /proc cannot be read.
std::vector<long> ListThreads() {
  std::vector<long> tids;
  const long fd = RawSyscall6(SYS_openat, AT_FDCWD, reinterpret_cast<long>("/proc/self/task"),
                              O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return tids;
  alignas(8) char buf[4096];
  for (;;) {
    const long n = RawSyscall6(SYS_getdents64, fd, reinterpret_cast<long>(buf), sizeof buf);
    if (n <= 0) break;
    for (long at = 0; at < n;) {
      const auto* d = reinterpret_cast<const struct dirent64*>(buf + at);
      if (d->d_name[0] >= '0' && d->d_name[0] <= '9') tids.push_back(std::atol(d->d_name));
      at += d->d_reclen;
    }
  }
  RawSyscall6(SYS_close, fd);
  return tids;
}

// Reads up to size-1 bytes of a /proc file, NUL-terminated; false if it cannot be read.
[[maybe_unused]] bool ReadProcFile(const char* path, char* buf, size_t size) {
  const long fd =
      RawSyscall6(SYS_openat, AT_FDCWD, reinterpret_cast<long>(path), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const long n =
      RawSyscall6(SYS_read, fd, reinterpret_cast<long>(buf), static_cast<long>(size - 1));
  RawSyscall6(SYS_close, fd);
  if (n < 0) return false;
  buf[n] = '\0';
  return true;
}

// Under qemu-user (aarch64 code on an x86-64 kernel, which /proc/cpuinfo shows) the process
// also holds qemu's own helper threads: they block every real-time signal and never run
// libc's code, so they are not waited for (nor is an emulated program's thread that blocks
// them all). Nowhere else is a thread skipped.
bool IsEmulatorThread(long tid) {
#if defined(__aarch64__)
  static const bool emulated = [] {
    char buf[512];
    return ReadProcFile("/proc/cpuinfo", buf, sizeof buf) &&
           std::strstr(buf, "vendor_id") != nullptr;
  }();
  if (!emulated) return false;
  char path[64], status[2048];
  std::snprintf(path, sizeof path, "/proc/self/task/%ld/status", tid);
  if (!ReadProcFile(path, status, sizeof status)) return false;
  const char* blk = std::strstr(status, "SigBlk:");
  if (!blk) return false;
  const unsigned long mask = std::strtoul(blk + 7, nullptr, 16);
  return (mask >> 34) == 0x3FFFFFFF;  // every real-time signal blocked
#else
  (void)tid;
  return false;
#endif
}

long NowNs() {
  timespec t{};
  RawSyscall6(SYS_clock_gettime, CLOCK_MONOTONIC, reinterpret_cast<long>(&t));
  return t.tv_sec * 1'000'000'000L + t.tv_nsec;
}

void Nap() {
  const timespec t{0, 200'000};
  RawSyscall6(SYS_nanosleep, reinterpret_cast<long>(&t), 0);
}

bool Parked(long tid) {
  const int n = std::min(g_parked.load(std::memory_order_acquire), kMaxParked);
  return std::find(g_tids, g_tids + n, tid) != g_tids + n;
}

}  // namespace

Status ParkOtherThreads(std::vector<uint64_t*>* resume_pcs) {
  resume_pcs->clear();
  const long self = RawSyscall6(SYS_gettid);
  std::vector<long> tids = ListThreads();
  if (tids.size() <= 1) return Status::Ok();  // alone, or /proc unreadable

  const long pid = RawSyscall6(SYS_getpid);
  g_self_pid.store(pid, std::memory_order_relaxed);
  g_go.store(0, std::memory_order_relaxed);
  g_slots.store(0, std::memory_order_relaxed);
  g_parked.store(0, std::memory_order_relaxed);
  struct sigaction act {};
  act.sa_sigaction = OnPark;
  act.sa_flags = SA_SIGINFO | SA_RESTART;
  sigfillset(&act.sa_mask);
  g_park_signal = SIGRTMAX;
  if (sigaction(ParkSignal(), &act, &g_old_action) != 0)
    return Status::FromErrno("sigaction for stopping the other threads", errno);

  // Signal every thread not yet signalled, until a listing shows no new one (a thread may
  // start another before it stops). A thread that exits before stopping is not waited for.
  // One that cannot be signalled at all means libc must stay as it is.
  std::vector<long> signalled, gone;
  const long deadline = NowNs() + kWaitNs;
  for (;;) {
    bool fresh = false;
    for (long tid : tids) {
      if (tid == self || std::find(signalled.begin(), signalled.end(), tid) != signalled.end() ||
          std::find(gone.begin(), gone.end(), tid) != gone.end() || IsEmulatorThread(tid))
        continue;
      long rc = RawSyscall6(SYS_tgkill, pid, tid, ParkSignal());
      // Refused before any thread was signalled: try the signals below (up to 4 of them).
      while (rc == -EINVAL && signalled.empty() && ParkSignal() > SIGRTMAX - 4) {
        sigaction(ParkSignal(), &g_old_action, nullptr);
        --g_park_signal;
        if (sigaction(ParkSignal(), &act, &g_old_action) != 0)
          return Status::FromErrno("sigaction for stopping the other threads", errno);
        rc = RawSyscall6(SYS_tgkill, pid, tid, ParkSignal());
      }
      if (rc == 0) {
        signalled.push_back(tid);
        fresh = true;
      } else if (rc != -ESRCH) {  // (ESRCH: it has exited)
        // A signal already sent finds the handler still there and goes on at once.
        UnparkThreads();
        if (signalled.empty()) sigaction(ParkSignal(), &g_old_action, nullptr);
        return Status::Error("cannot send signal " + std::to_string(ParkSignal()) + " to thread " +
                             std::to_string(tid) + " to stop it for libc's patching: " +
                             std::strerror(static_cast<int>(-rc)));
      }
    }
    for (;;) {
      size_t done = 0;
      for (long tid : signalled) {
        if (Parked(tid) || std::find(gone.begin(), gone.end(), tid) != gone.end()) {
          ++done;
        } else if (RawSyscall6(SYS_tgkill, pid, tid, 0) == -ESRCH) {
          gone.push_back(tid);
          ++done;
        }
      }
      if (done == signalled.size()) break;
      if (NowNs() > deadline) {
        long late = 0;
        for (long tid : signalled)
          if (!Parked(tid) && std::find(gone.begin(), gone.end(), tid) == gone.end()) late = tid;
        UnparkThreads();  // the late one finds the handler still there, and goes on at once
        return Status::Error("thread " + std::to_string(late) +
                             " did not stop for libc's patching within 2 s (it blocks signal " +
                             std::to_string(ParkSignal()) + ", or is stuck in the kernel)");
      }
      Nap();
    }
    if (!fresh) break;
    tids = ListThreads();
  }
  const int n = g_parked.load(std::memory_order_acquire);
  if (n > kMaxParked) {
    UnparkThreads();
    sigaction(ParkSignal(), &g_old_action, nullptr);
    return Status::Error(std::to_string(n) + " threads to stop for libc's patching: over " +
                         std::to_string(kMaxParked));
  }
  resume_pcs->assign(g_pcs, g_pcs + n);
  g_all_stopped = true;
  return Status::Ok();
}

void UnparkThreads() {
  if (g_self_pid.load(std::memory_order_relaxed) == 0) return;  // nothing was stopped
  g_go.store(1, std::memory_order_release);
  RawSyscall6(SYS_futex, reinterpret_cast<long>(&g_go), FUTEX_WAKE_PRIVATE, INT32_MAX);
  // A handler still waiting to run for a thread that never stopped keeps ours (it returns at
  // once); otherwise the program's own action for the signal comes back.
  if (g_all_stopped) sigaction(ParkSignal(), &g_old_action, nullptr);
  g_all_stopped = false;
}

}  // namespace fanstore::intercept
