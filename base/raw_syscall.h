// RawSyscall: the runtime's private way into the kernel. It executes its own `syscall`
// instruction, so it is never intercepted, and it never touches errno: the result is the
// kernel's raw value (-errno on error).
// Thread-safety: as the system call itself; async-signal-safe; usable in a vfork child.
#pragma once

namespace fanstore::base {

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

}  // namespace fanstore::base
