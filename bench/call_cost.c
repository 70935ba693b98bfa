/* What one system call of each shape unrelated work makes costs, in ns: the fastest of
   ROUNDS rounds of 2,000 calls, less the same for getppid (which fanrun does not patch) in
   the same process, so that the machine's drift between processes cancels. Run natively
   and under fanrun by bench/native_cost.sh --per-call; the difference is what the
   interception adds to each call.
   Usage: call_cost [ROUNDS]   (default 30) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double Now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

enum {
  kGetppid,
  kFcntl,
  kDupClose,
  kFstat,
  kFstatat,
  kOpenatClose,
  kOpenAbsClose,
  kStatMissing,
  kStatFound,
  kSyscallGetppid,
  kShapes
};
static const char* const kNames[kShapes] = {"getppid (baseline)",
                                            "fcntl(F_GETFL), native dir",
                                            "fcntl(F_DUPFD_CLOEXEC)+close",
                                            "fstat of a native dir",
                                            "fstatat of a child",
                                            "openat of a child dir+close",
                                            "open of an absolute dir+close",
                                            "stat of a missing file",
                                            "stat of a file",
                                            "syscall(SYS_getppid)"};

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 30, n = 2000;
  const int dir = open("/usr/share", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (dir < 0) {
    perror("call_cost: /usr/share");
    return 1;
  }
  double best[kShapes];
  for (int m = 0; m < kShapes; ++m) best[m] = 1e18;
  struct stat st;
  for (int r = 0; r < rounds; ++r) {
    for (int m = 0; m < kShapes; ++m) {
      const double t0 = Now();
      for (int i = 0; i < n; ++i) {
        switch (m) {
          case kGetppid:
            getppid();
            break;
          case kFcntl:
            fcntl(dir, F_GETFL);
            break;
          case kDupClose:
            close(fcntl(dir, F_DUPFD_CLOEXEC, 0));
            break;
          case kFstat:
            fstat(dir, &st);
            break;
          case kFstatat:
            fstatat(dir, "doc", &st, AT_SYMLINK_NOFOLLOW);
            break;
          case kOpenatClose:
            close(openat(dir, "doc", O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_DIRECTORY));
            break;
          case kOpenAbsClose:
            close(open("/usr/share/doc", O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_DIRECTORY));
            break;
          case kStatMissing:
            stat("/usr/bin/no-such-file", &st);
            break;
          case kStatFound:
            stat("/usr/bin/ls", &st);
            break;
          case kSyscallGetppid:
            syscall(SYS_getppid);
            break;
        }
      }
      const double per = (Now() - t0) / n;
      if (per < best[m]) best[m] = per;
    }
  }
  for (int m = 0; m < kShapes; ++m) printf("%s\t%.1f\n", kNames[m], best[m] - best[kGetppid]);
  printf("getppid ns\t%.1f\n", best[kGetppid]);
  return 0;
}
