#include "io/yield.h"

#include <dirent.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace fanstore::io {
namespace {

// <linux/ioprio.h> is not in every libc's headers: the ABI's values.
constexpr int kIoprioWhoProcess = 1;
constexpr int kIoprioClassShift = 13;
constexpr int kIoprioClassIdle = 3;

int SetIoClass(pid_t tid, int io_class) {
  return static_cast<int>(
      ::syscall(SYS_ioprio_set, kIoprioWhoProcess, tid, io_class << kIoprioClassShift));
}

}  // namespace

int YieldToOthers() {
  const sched_param none{};
  if (::sched_setscheduler(0, SCHED_IDLE, &none) != 0) return -errno;
  SetIoClass(0, kIoprioClassIdle);  // (a refusal leaves the disk shared, as before)
  return 0;
}

int StopYielding() {
  DIR* tasks = ::opendir("/proc/self/task");
  if (!tasks) return 0;
  int moved = 0;
  const sched_param none{};
  while (const dirent* e = ::readdir(tasks)) {
    const pid_t tid = static_cast<pid_t>(std::atoi(e->d_name));
    if (tid <= 0 || ::sched_getscheduler(tid) != SCHED_IDLE) continue;
    if (::sched_setscheduler(tid, SCHED_OTHER, &none) != 0) continue;
    SetIoClass(tid, 0);  // (IOPRIO_CLASS_NONE: the class its nice value gives)
    ++moved;
  }
  ::closedir(tasks);
  return moved;
}

}  // namespace fanstore::io
