// RawSyscall: the runtime's private way into the kernel. It executes its own system call
// instruction (`syscall` on x86-64, `svc #0` on aarch64), so it is never intercepted, and
// it never touches errno: the result is the kernel's raw value (-errno on error).
// Thread-safety: as the system call itself; async-signal-safe; usable in a vfork child.
#pragma once

namespace fanstore::base {

#if defined(__x86_64__)
inline long RawSyscall6(long nr, long a1 = 0, long a2 = 0, long a3 = 0, long a4 = 0, long a5 = 0,
                        long a6 = 0) noexcept {
  long ret;
  register long r10 asm("r10") = a4;
  register long r8 asm("r8") = a5;
  register long r9 asm("r9") = a6;
  asm volatile("syscall"
               : "=a"(ret)
               : "a"(nr), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
               : "rcx", "r11", "memory");
  return ret;
}
#elif defined(__aarch64__)
inline long RawSyscall6(long nr, long a1 = 0, long a2 = 0, long a3 = 0, long a4 = 0, long a5 = 0,
                        long a6 = 0) noexcept {
  register long x8 asm("x8") = nr;
  register long x0 asm("x0") = a1;
  register long x1 asm("x1") = a2;
  register long x2 asm("x2") = a3;
  register long x3 asm("x3") = a4;
  register long x4 asm("x4") = a5;
  register long x5 asm("x5") = a6;
  asm volatile("svc #0"
               : "+r"(x0)
               : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
               : "memory");
  return x0;
}
#else
#error "FanStore runs on x86-64 and aarch64"
#endif

}  // namespace fanstore::base
