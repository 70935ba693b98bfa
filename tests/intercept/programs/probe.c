/* probe: a driver for the interception tests. Each subcommand exercises one process shape
 * or libc path and prints one line of results; the shell test compares them with what the
 * test hook must produce (and, with the pass-through hook, with a run without preload). */
#define _GNU_SOURCE
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char** environ;
static const char* EIO_PATH = "/fanstore-test/eio";

static const char* ErrName(int e) {
  switch (e) {
    case 0:
      return "OK";
    case ENOENT:
      return "ENOENT";
    case EHOSTDOWN:
      return "EHOSTDOWN";
    default:
      return strerrorname_np(e) ? strerrorname_np(e) : "E?";
  }
}

static int OpenErr(const char* p) {
  const int fd = open(p, O_RDONLY);
  if (fd >= 0) {
    close(fd);
    return 0;
  }
  return errno;
}

static int CmdLibc(const char* p) {
  errno = 0;
  const int fd = open(p, O_RDONLY);
  printf("open=%s", fd >= 0 ? "OK" : ErrName(errno));
  if (fd >= 0) close(fd);
  errno = 0;
  FILE* f = fopen(p, "r");
  printf(" fopen=%s", f ? "OK" : ErrName(errno));
  if (f) fclose(f);
  errno = 0;
  DIR* d = opendir(p);
  printf(" opendir=%s", d ? "OK" : ErrName(errno));
  if (d) closedir(d);
  struct stat st;
  errno = 0;
  printf(" stat=%s", stat(p, &st) == 0 ? "OK" : ErrName(errno));
  errno = 0;
  printf(" access=%s", access(p, R_OK) == 0 ? "OK" : ErrName(errno));
  char buf[PATH_MAX];
  errno = 0;
  printf(" realpath=%s\n", realpath(p, buf) ? "OK" : ErrName(errno));
  return 0;
}

static int CmdNull(void) {
  const int fd = open("/fanstore-test/null", O_RDONLY);
  if (fd < 0) {
    printf("null=%s\n", ErrName(errno));
    return 1;
  }
  char link[64], target[256];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, target, sizeof target - 1);
  target[n > 0 ? n : 0] = 0;
  char c;
  printf("null=fd->%s read=%zd\n", target, read(fd, &c, 1));
  close(fd);
  return 0;
}

static int CmdGetpid(long n) {
  long sum = 0;
  for (long i = 0; i < n; ++i) sum += getpid() == getpid() ? 0 : 1; /* 2n calls */
  printf("getpid calls=%ld mismatches=%ld\n", 2 * n, sum);
  return 0;
}

static long g_per_thread;
static atomic_int g_bad;
static void* ThreadMain(void* arg) {
  (void)arg;
  for (long i = 0; i < g_per_thread; ++i) {
    (void)getpid();
    if (i % 100 == 0 && OpenErr(EIO_PATH) != EHOSTDOWN) atomic_fetch_add(&g_bad, 1);
  }
  return NULL;
}

static int CmdThreads(int t, long n) {
  pthread_t th[64];
  g_per_thread = n;
  for (int i = 0; i < t; ++i) pthread_create(&th[i], NULL, ThreadMain, NULL);
  for (int i = 0; i < t; ++i) pthread_join(th[i], NULL);
  printf("threads=%d getpid calls=%ld bad=%d\n", t, t * n, atomic_load(&g_bad));
  return 0;
}

static int CmdFork(int k) {
  int good = 0;
  for (int i = 0; i < k; ++i) {
    const pid_t pid = fork();
    if (pid == 0) _exit(OpenErr(EIO_PATH) == EHOSTDOWN && OpenErr("/") == 0 ? 0 : 1);
    int st = 0;
    waitpid(pid, &st, 0);
    good += WIFEXITED(st) && WEXITSTATUS(st) == 0;
  }
  printf("fork children=%d intercepted=%d\n", k, good);
  return 0;
}

static int CmdVfork(void) {
  volatile int child_err = -1;
  const pid_t pid = vfork();
  if (pid == 0) {
    child_err = OpenErr(EIO_PATH); /* shares the parent's memory */
    _exit(0);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  printf("vfork child open=%s\n", ErrName(child_err));
  return 0;
}

static int CmdSpawn(char** argv) {
  pid_t pid;
  const int rc = posix_spawn(&pid, argv[0], NULL, NULL, argv, environ);
  if (rc != 0) {
    printf("spawn=%s\n", ErrName(rc));
    return 1;
  }
  int st = 0;
  waitpid(pid, &st, 0);
  printf("spawn exit=%d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  return 0;
}

static int CmdExecScrubbed(char** argv) {
  char* env[] = {"PATH=/usr/bin:/bin", NULL};
  execve(argv[0], argv, env);
  printf("execve=%s\n", ErrName(errno));
  return 1;
}

static atomic_long g_sig_ok, g_sig_bad;
static void OnAlarm(int sig) {
  (void)sig;
  const int saved = errno;
  if (OpenErr(EIO_PATH) == EHOSTDOWN)
    atomic_fetch_add(&g_sig_ok, 1);
  else
    atomic_fetch_add(&g_sig_bad, 1);
  errno = saved;
}

static int CmdSignals(long n) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = OnAlarm;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGALRM, &sa, NULL);
  struct itimerval it = {{0, 50}, {0, 50}};
  setitimer(ITIMER_REAL, &it, NULL);
  long bad = 0;
  for (long i = 0; i < n; ++i)
    if (OpenErr(EIO_PATH) != EHOSTDOWN) ++bad;
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &off, NULL);
  printf("signals handled=%s handler_bad=%ld main_bad=%ld\n",
         atomic_load(&g_sig_ok) > 0 ? "yes" : "no", atomic_load(&g_sig_bad), bad);
  return 0;
}

#if defined(__x86_64__)
/* Vector state across a call into libc's getpid (whose own code never touches vector
   registers): any change can only come from the interception path. */
__attribute__((target("avx"))) static int CheckYmm(void) {
  static unsigned char before[16 * 32] __attribute__((aligned(32)));
  static unsigned char after[16 * 32] __attribute__((aligned(32)));
  for (int i = 0; i < 16 * 32; ++i) before[i] = (unsigned char)(i * 7 + 3);
  pid_t (*fn)(void) = getpid;
  register void* pb asm("r12") = before;
  register void* pa asm("r13") = after;
  register void* pf asm("r15") = (void*)fn;
  asm volatile(
      "vmovdqu 0(%%r12), %%ymm0\n vmovdqu 32(%%r12), %%ymm1\n vmovdqu 64(%%r12), %%ymm2\n"
      "vmovdqu 96(%%r12), %%ymm3\n vmovdqu 128(%%r12), %%ymm4\n vmovdqu 160(%%r12), %%ymm5\n"
      "vmovdqu 192(%%r12), %%ymm6\n vmovdqu 224(%%r12), %%ymm7\n vmovdqu 256(%%r12), %%ymm8\n"
      "vmovdqu 288(%%r12), %%ymm9\n vmovdqu 320(%%r12), %%ymm10\n vmovdqu 352(%%r12), %%ymm11\n"
      "vmovdqu 384(%%r12), %%ymm12\n vmovdqu 416(%%r12), %%ymm13\n vmovdqu 448(%%r12), %%ymm14\n"
      "vmovdqu 480(%%r12), %%ymm15\n"
      "mov %%rsp, %%r14\n sub $128, %%rsp\n and $-16, %%rsp\n call *%%r15\n mov %%r14, %%rsp\n"
      "vmovdqu %%ymm0, 0(%%r13)\n vmovdqu %%ymm1, 32(%%r13)\n vmovdqu %%ymm2, 64(%%r13)\n"
      "vmovdqu %%ymm3, 96(%%r13)\n vmovdqu %%ymm4, 128(%%r13)\n vmovdqu %%ymm5, 160(%%r13)\n"
      "vmovdqu %%ymm6, 192(%%r13)\n vmovdqu %%ymm7, 224(%%r13)\n vmovdqu %%ymm8, 256(%%r13)\n"
      "vmovdqu %%ymm9, 288(%%r13)\n vmovdqu %%ymm10, 320(%%r13)\n vmovdqu %%ymm11, 352(%%r13)\n"
      "vmovdqu %%ymm12, 384(%%r13)\n vmovdqu %%ymm13, 416(%%r13)\n vmovdqu %%ymm14, 448(%%r13)\n"
      "vmovdqu %%ymm15, 480(%%r13)\n vzeroupper\n"
      : "+r"(pb), "+r"(pa), "+r"(pf)
      :
      : "rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "r14", "memory", "cc", "xmm0",
        "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
        "xmm12", "xmm13", "xmm14", "xmm15");
  int diff = 0;
  for (int i = 0; i < 16 * 32; ++i) diff += before[i] != after[i];
  return diff;
}

/* AVX-512: zmm0-31 and the opmask registers k1-k7 across a call into libc's getpid. */
__attribute__((target("avx512f"))) static int CheckZmm(void) {
  static unsigned char before[32 * 64 + 64] __attribute__((aligned(64)));
  static unsigned char after[32 * 64 + 64] __attribute__((aligned(64)));
  for (int i = 0; i < (int)sizeof before; ++i) before[i] = (unsigned char)(i * 13 + 5);
  memset(after, 0, sizeof after);
  pid_t (*fn)(void) = getpid;
  register void* pb asm("r12") = before;
  register void* pa asm("r13") = after;
  register void* pf asm("r15") = (void*)fn;
#define Z(n) "vmovdqu64 " #n "*64(%%r12), %%zmm" #n "\n"
#define ZS(n) "vmovdqu64 %%zmm" #n ", " #n "*64(%%r13)\n"
#define K(n) "kmovw 2048+" #n "*2(%%r12), %%k" #n "\n"
#define KS(n) "kmovw %%k" #n ", 2048+" #n "*2(%%r13)\n"
  asm volatile(Z(0) Z(1) Z(2) Z(3) Z(4) Z(5) Z(6) Z(7) Z(8) Z(9) Z(10) Z(11) Z(12) Z(13) Z(14) Z(15)
                   Z(16) Z(17) Z(18) Z(19) Z(20) Z(21) Z(22) Z(23) Z(24) Z(25) Z(26) Z(27) Z(28)
                       Z(29) Z(30) Z(31) K(1) K(2) K(3) K(4) K(5) K(6)
                           K(7) "mov %%rsp, %%r14\n sub $128, %%rsp\n and $-16, %%rsp\n call "
                                "*%%r15\n mov %%r14, %%rsp\n" ZS(0) ZS(1) ZS(2) ZS(3) ZS(4) ZS(5)
                                    ZS(6) ZS(7) ZS(8) ZS(9) ZS(10) ZS(11) ZS(12) ZS(13) ZS(14)
                                        ZS(15) ZS(16) ZS(17) ZS(18) ZS(19) ZS(20) ZS(21) ZS(22)
                                            ZS(23) ZS(24) ZS(25) ZS(26) ZS(27) ZS(28) ZS(29) ZS(30)
                                                ZS(31) KS(1) KS(2) KS(3) KS(4) KS(5) KS(6)
                                                    KS(7) "vzeroupper\n"
               : "+r"(pb), "+r"(pa), "+r"(pf)
               :
               : "rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "r14", "memory", "cc",
                 "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
                 "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18",
                 "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27",
                 "xmm28", "xmm29", "xmm30", "xmm31", "k1", "k2", "k3", "k4", "k5", "k6", "k7");
#undef Z
#undef ZS
#undef K
#undef KS
  int diff = 0;
  for (int i = 0; i < 32 * 64; ++i) diff += before[i] != after[i];
  for (int i = 2048 + 2; i < 2048 + 16; ++i) diff += before[i] != after[i];
  return diff;
}

/* MXCSR and the x87 control word across getpid, set to fixed values unlike anything a
   hook would leave (round down; x87 round up), then put back to the defaults. */
static int CheckControlWords(void) {
  const unsigned int mx_set = 0x3f80, mx_default = 0x1f80;
  const unsigned short cw_set = 0x0b7f, cw_default = 0x037f;
  unsigned int mx_after = 0;
  unsigned short cw_after = 0;
  asm volatile("ldmxcsr %0" : : "m"(mx_set));
  asm volatile("fldcw %0" : : "m"(cw_set));
  (void)getpid();
  asm volatile("stmxcsr %0" : "=m"(mx_after));
  asm volatile("fnstcw %0" : "=m"(cw_after));
  asm volatile("ldmxcsr %0" : : "m"(mx_default));
  asm volatile("fldcw %0" : : "m"(cw_default));
  return (mx_after != mx_set) + (cw_after != cw_set);
}

static int CmdVector(long rounds) {
  if (!__builtin_cpu_supports("avx")) {
    printf("vector SKIP (no AVX)\n");
    return 0;
  }
  const int has512 = __builtin_cpu_supports("avx512f");
  long bad = 0;
  for (long i = 0; i < rounds; ++i) {
    bad += CheckYmm() != 0;
    if (has512) bad += CheckZmm() != 0;
    bad += CheckControlWords() != 0;
  }
  printf("vector rounds=%ld corrupted=%ld\n", rounds, bad);
  fprintf(stderr, "vector: checked ymm0-15%s, MXCSR and the x87 control word\n",
          has512 ? ", zmm0-31, k1-k7" : "");
  return 0;
}

/* Whether the upper halves of ymm/zmm0-15 are in their initial state after a call into
   libc's getpid made with them clean (vzeroupper): natively they stay so, and the
   interception must leave them so too, or every legacy SSE instruction after it pays a
   transition penalty. XGETBV(1) bits 2 (AVX) and 6 (ZMM_Hi256). */
__attribute__((target("avx,xsave"))) static unsigned UpperInUseAfterGetpid(void) {
  unsigned lo, hi;
  asm volatile("vzeroupper" ::: "memory");
  (void)getpid();
  asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
  return lo & 0x44;
}

static int CmdUpper(long rounds) {
  unsigned a, b, c, d;
  if (!__builtin_cpu_supports("avx") || !__get_cpuid_count(0xD, 1, &a, &b, &c, &d) ||
      !(a & (1u << 2))) {
    printf("upper SKIP (no AVX or no XGETBV(1))\n");
    return 0;
  }
  long dirty = 0;
  for (long i = 0; i < rounds; ++i) dirty += UpperInUseAfterGetpid() != 0;
  printf("upper rounds=%ld in_use=%ld\n", rounds, dirty);
  return 0;
}
#elif defined(__aarch64__)
/* v0-v31 and FPCR across a call into libc's getpid (whose own code touches neither): any
   change can only come from the interception path. */
#define LQ(a, b, off) "ldp q" #a ", q" #b ", [x19, #" #off "]\n"
#define SQ(a, b, off) "stp q" #a ", q" #b ", [x20, #" #off "]\n"
// clang-format off
#define ALL_Q(M)                                                                          \
  M(0, 1, 0) M(2, 3, 32) M(4, 5, 64) M(6, 7, 96) M(8, 9, 128) M(10, 11, 160)              \
  M(12, 13, 192) M(14, 15, 224) M(16, 17, 256) M(18, 19, 288) M(20, 21, 320)              \
  M(22, 23, 352) M(24, 25, 384) M(26, 27, 416) M(28, 29, 448) M(30, 31, 480)
// clang-format on
static int CheckQ(void) {
  static unsigned char before[32 * 16] __attribute__((aligned(16)));
  static unsigned char after[32 * 16] __attribute__((aligned(16)));
  for (int i = 0; i < 32 * 16; ++i) before[i] = (unsigned char)(i * 7 + 3);
  memset(after, 0, sizeof after);
  unsigned long fpcr_after = 0;
  register void* pb asm("x19") = before;
  register void* pa asm("x20") = after;
  register void* pf asm("x21") = (void*)getpid;
  asm volatile("mrs x23, fpcr\n mov x9, #0x00c00000\n msr fpcr, x9\n" /* round toward zero */
               ALL_Q(LQ) "blr x21\n mrs x24, fpcr\n" ALL_Q(SQ) "msr fpcr, x23\n mov %0, x24\n"
               : "=r"(fpcr_after), "+r"(pb), "+r"(pa), "+r"(pf)
               :
               : "x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10", "x11", "x12",
                 "x13", "x14", "x15", "x16", "x17", "x18", "x23", "x24", "x30", "memory", "cc",
                 "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12",
                 "v13", "v14", "v15", "v16", "v17", "v18", "v19", "v20", "v21", "v22", "v23", "v24",
                 "v25", "v26", "v27", "v28", "v29", "v30", "v31");
  int diff = fpcr_after != 0x00c00000;
  for (int i = 0; i < 32 * 16; ++i) diff += before[i] != after[i];
  return diff;
}
#undef LQ
#undef SQ
#undef ALL_Q

static int CmdVector(long rounds) {
  long bad = 0;
  for (long i = 0; i < rounds; ++i) bad += CheckQ() != 0;
  printf("vector rounds=%ld corrupted=%ld\n", rounds, bad);
  fprintf(stderr, "vector: checked v0-v31 and FPCR\n");
  return 0;
}

static int CmdUpper(long rounds) {
  (void)rounds;
  printf("upper SKIP (x86-64's AVX upper halves; aarch64 has none)\n");
  return 0;
}
#endif

/* ns per getpid() call (libc's wrapper, one `syscall` each), best of 5 rounds of n. */
static int CmdTimeGetpid(long n) {
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; ++i) (void)getpid();
    clock_gettime(CLOCK_MONOTONIC, &b);
    const double ns = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n;
    if (ns < best) best = ns;
  }
  printf("%.1f\n", best);
  return 0;
}

/* Reads PATH with the application's own io_uring (liburing): such requests never pass
   through libc's syscall sites, so the runtime cannot see them (a documented limit); they
   must simply work as without the preload library. Prints the bytes read or the error. */
static int CmdUring(const char* path) {
  struct io_uring ring;
  int rc = io_uring_queue_init(4, &ring, 0);
  if (rc < 0) {
    printf("uring=unavailable(%s)\n", ErrName(-rc));
    return 0;
  }
  struct io_uring_sqe* sqe = io_uring_get_sqe(&ring);
  io_uring_prep_openat(sqe, AT_FDCWD, path, O_RDONLY, 0);
  io_uring_submit(&ring);
  struct io_uring_cqe* cqe;
  io_uring_wait_cqe(&ring, &cqe);
  const int fd = cqe->res;
  io_uring_cqe_seen(&ring, cqe);
  if (fd < 0) {
    printf("uring open=%s\n", ErrName(-fd));
    io_uring_queue_exit(&ring);
    return 0;
  }
  static char buf[1 << 20];
  long total = 0;
  for (;;) {
    sqe = io_uring_get_sqe(&ring);
    io_uring_prep_read(sqe, fd, buf, sizeof buf, (unsigned long long)total);
    io_uring_submit(&ring);
    io_uring_wait_cqe(&ring, &cqe);
    const int n = cqe->res;
    io_uring_cqe_seen(&ring, cqe);
    if (n <= 0) break;
    total += n;
  }
  close(fd);
  io_uring_queue_exit(&ring);
  printf("uring read=%ld\n", total);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr,
            "usage: probe libc PATH | null | getpid N | threads T N | fork K | vfork |"
            " spawn PROG ARGS | exec-scrubbed PROG ARGS | signals N | vector N | upper N\n");
    return 2;
  }
  const char* c = argv[1];
  if (!strcmp(c, "libc") && argc == 3) return CmdLibc(argv[2]);
  if (!strcmp(c, "null")) return CmdNull();
  if (!strcmp(c, "getppid")) {
    printf("getppid=%ld\n", (long)getppid());
    return 0;
  }
  if (!strcmp(c, "getpid") && argc == 3) return CmdGetpid(atol(argv[2]));
  if (!strcmp(c, "threads") && argc == 4) return CmdThreads(atoi(argv[2]), atol(argv[3]));
  if (!strcmp(c, "fork") && argc == 3) return CmdFork(atoi(argv[2]));
  if (!strcmp(c, "vfork")) return CmdVfork();
  if (!strcmp(c, "spawn") && argc >= 3) return CmdSpawn(argv + 2);
  if (!strcmp(c, "exec-scrubbed") && argc >= 3) return CmdExecScrubbed(argv + 2);
  if (!strcmp(c, "signals") && argc == 3) return CmdSignals(atol(argv[2]));
  if (!strcmp(c, "vector") && argc == 3) return CmdVector(atol(argv[2]));
  if (!strcmp(c, "upper") && argc == 3) return CmdUpper(atol(argv[2]));
  if (!strcmp(c, "time-getpid") && argc == 3) return CmdTimeGetpid(atol(argv[2]));
  if (!strcmp(c, "uring") && argc == 3) return CmdUring(argv[2]);
  fprintf(stderr, "probe: bad arguments\n");
  return 2;
}
