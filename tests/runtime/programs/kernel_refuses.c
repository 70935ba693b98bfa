// kernel_refuses WHAT CMD [ARGS...]: runs CMD with one kernel feature refused, as an older
// kernel or a container's seccomp profile refuses it; every other call is allowed.
//   io_uring  io_uring_setup fails with ENOSYS (RHEL 8's 4.18, a profile that blocks it)
//   collapse  madvise(MADV_COLLAPSE) fails with EINVAL (a kernel before 6.1, or shmem huge
//             pages denied)
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#endif

enum { kMadvCollapse = 25 };

int main(int argc, char** argv) {
  const int uring = argc >= 3 && strcmp(argv[1], "io_uring") == 0;
  const int collapse = argc >= 3 && strcmp(argv[1], "collapse") == 0;
  if (!uring && !collapse) {
    fprintf(stderr, "usage: kernel_refuses io_uring|collapse CMD [ARGS...]\n");
    return 2;
  }
  // Calls of another architecture pass; then the one call refused, the rest allowed.
  struct sock_filter filter[9] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
  };
  unsigned short n = 4;
  if (uring) {
    filter[n++] =
        (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1);
    filter[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS);
  } else {  // (madvise's advice is its third argument; its low 32 bits hold any valid value)
    filter[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_madvise, 0, 3);
    filter[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                               offsetof(struct seccomp_data, args[2]));
    filter[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kMadvCollapse, 0, 1);
    filter[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EINVAL);
  }
  filter[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  struct sock_fprog prog = {n, filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
    perror("kernel_refuses: seccomp");
    return 125;
  }
  execvp(argv[2], argv + 2);
  perror(argv[2]);
  return 127;
}
