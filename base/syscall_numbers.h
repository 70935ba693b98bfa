// The x86-64 numbers of the system calls FanStore names that are newer than the oldest C
// library headers it builds against: glibc 2.28 to 2.31 (RHEL 8, Debian 11) list calls
// only up to their own release's kernel. The numbers are the kernel's ABI and never change.
// No other include: the prefilter translation units include this too.
// Thread-safety: constants.
#pragma once

#include <sys/syscall.h>

#ifndef SYS_clone3
#define SYS_clone3 435
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#ifndef SYS_faccessat2
#define SYS_faccessat2 439
#endif
