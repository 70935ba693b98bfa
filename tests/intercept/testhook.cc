// A test hook for the interception layer (not the product hook). FANSTORE_TESTHOOK selects:
// getpid scribbles over every vector register, the opmasks, MXCSR and the x87 control
// word before passing (except in handle-getpid mode), so the vector tests prove restoring.
//   rewrite (default)  open/openat/stat calls on "/fanstore-test/eio*" fail with EHOSTDOWN
//                      (an errno nothing else produces), and so does readlink of anything
//                      under "/fanstore-test" (realpath's walk); "/fanstore-test/null" opens
//                      /dev/null; getpid is counted and passed to the kernel.
//   pass               every patchable site is patched and every call passed (getpid counted)
//   handle-getpid      getpid is answered without the kernel (for the benchmark)
// FANSTORE_TESTHOOK_COUNT_FILE: at exit, append "<pid> <getpid calls seen>\n" to it.
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/raw_syscall.h"
#include "base/syscall_numbers.h"
#include "intercept/hook_api.h"

namespace fanstore::intercept {

using base::RawSyscall6;

PrefilterResult TestPrefilter(long nr, const long a[6]) noexcept;  // testhook_prefilter.cc

namespace {

enum class Mode { kRewrite, kPass, kHandleGetpid };
Mode g_mode = Mode::kRewrite;
std::atomic<long> g_getpid{0};
long g_pid = 0;
const char* g_count_file = nullptr;

bool IsTestPath(long p, const char* prefix) {
  const char* s = reinterpret_cast<const char*>(p);
  return s && std::strncmp(s, prefix, std::strlen(prefix)) == 0;
}

HookResult OnPath(long path) {
  if (IsTestPath(path, "/fanstore-test/eio")) return Handled(-EHOSTDOWN);
  if (IsTestPath(path, "/fanstore-test/null"))
    return Handled(RawSyscall6(SYS_openat, AT_FDCWD, reinterpret_cast<long>("/dev/null"),
                               O_RDONLY | O_CLOEXEC));
  return kPassToKernel;
}

#if defined(__x86_64__)
// Overwrites every register a hook's code could change (vector registers, opmasks, MXCSR,
// x87 control word), as the worst possible hook would: the entry must restore them all.
__attribute__((target("avx512f"), noinline)) void ScribbleAvx512() {
  asm volatile(
      "vpternlogd $0xff, %%zmm0, %%zmm0, %%zmm0\n"
      ".irp r,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31\n"
      "vmovdqa64 %%zmm0, %%zmm\\r\n"
      ".endr\n"
      "kxnorw %%k0, %%k0, %%k1\n kxnorw %%k0, %%k0, %%k2\n kxnorw %%k0, %%k0, %%k3\n"
      "kxnorw %%k0, %%k0, %%k4\n kxnorw %%k0, %%k0, %%k5\n kxnorw %%k0, %%k0, %%k6\n"
      "kxnorw %%k0, %%k0, %%k7\n" ::
          : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
            "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19",
            "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28",
            "xmm29", "xmm30", "xmm31", "k1", "k2", "k3", "k4", "k5", "k6", "k7");
}

__attribute__((target("avx"), noinline)) void ScribbleAvx() {
  asm volatile(
      "vpcmpeqd %%ymm0, %%ymm0, %%ymm0\n"
      ".irp r,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"
      "vmovdqa %%ymm0, %%ymm\\r\n"
      ".endr\n" ::
          : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
            "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
}

void Scribble() {
  if (__builtin_cpu_supports("avx512f"))
    ScribbleAvx512();
  else if (__builtin_cpu_supports("avx"))
    ScribbleAvx();
  const unsigned mxcsr = 0x1f80 | 0x6000 | 0x8040;  // round to zero, FTZ, DAZ
  const unsigned short fcw = 0x0f7f;                // x87: round to zero, single precision
  asm volatile("ldmxcsr %0\n fldcw %1" : : "m"(mxcsr), "m"(fcw));
}
#else
// aarch64: every vector register all ones, FPCR rounding toward zero with flush-to-zero,
// and FPSR's cumulative flags set.
__attribute__((noinline)) void Scribble() {
  asm volatile(
      "movi v0.2d, #-1\n"
      ".irp r,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31\n"
      "mov v\\r\\().16b, v0.16b\n"
      ".endr\n"
      "mov x9, #0x01c00000\n msr fpcr, x9\n mov x9, #0x1f\n msr fpsr, x9\n" ::
          : "x9", "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12",
            "v13", "v14", "v15", "v16", "v17", "v18", "v19", "v20", "v21", "v22", "v23", "v24",
            "v25", "v26", "v27", "v28", "v29", "v30", "v31");
}
#endif

HookResult TestHook(long nr, const long a[6]) noexcept {
  switch (nr) {
    case SYS_getpid:
      g_getpid.fetch_add(1, std::memory_order_relaxed);
      if (g_mode == Mode::kHandleGetpid) return Handled(g_pid);
      Scribble();
      return kPassToKernel;
    case SYS_open:
    case SYS_stat:
    case SYS_lstat:
    case SYS_access:
      return g_mode == Mode::kRewrite ? OnPath(a[0]) : kPassToKernel;
    case SYS_readlink:
      return g_mode == Mode::kRewrite && IsTestPath(a[0], "/fanstore-test") ? Handled(-EHOSTDOWN)
                                                                            : kPassToKernel;
    case SYS_readlinkat:
      return g_mode == Mode::kRewrite && IsTestPath(a[1], "/fanstore-test") ? Handled(-EHOSTDOWN)
                                                                            : kPassToKernel;
    case SYS_openat:
    case SYS_newfstatat:
    case SYS_statx:
    case SYS_faccessat:
    case SYS_faccessat2:
      return g_mode == Mode::kRewrite ? OnPath(a[1]) : kPassToKernel;
    default:
      return kPassToKernel;
  }
}

__attribute__((destructor)) void WriteCount() {
  if (!g_count_file) return;
  const long pid = ::getpid();  // counted too: reported without it
  if (FILE* f = std::fopen(g_count_file, "a")) {
    std::fprintf(f, "%ld %ld\n", pid, g_getpid.load() - 1);
    std::fclose(f);
  }
}

}  // namespace

HookSpec PreloadHookSpec() {
  const char* m = std::getenv("FANSTORE_TESTHOOK");
  if (m && std::strcmp(m, "pass") == 0) g_mode = Mode::kPass;
  if (m && std::strcmp(m, "handle-getpid") == 0) g_mode = Mode::kHandleGetpid;
  g_count_file = std::getenv("FANSTORE_TESTHOOK_COUNT_FILE");
  g_pid = RawSyscall6(SYS_getpid);
  HookSpec s;
  s.hook = &TestHook;
  s.prefilter = &TestPrefilter;
  if (g_mode == Mode::kPass) {
    s.interest.all = true;
  } else {
    for (long nr :
         {SYS_getpid, SYS_getppid, SYS_open, SYS_openat, SYS_stat, SYS_lstat, SYS_newfstatat,
          SYS_statx, SYS_access, SYS_faccessat, SYS_faccessat2, SYS_readlink, SYS_readlinkat})
      if (nr >= 0) s.interest.nrs.set(static_cast<size_t>(nr));  // (< 0: not on aarch64)
  }
  return s;
}

}  // namespace fanstore::intercept
