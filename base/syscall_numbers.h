// The system call numbers FanStore names that some supported C library headers lack.
// - Calls newer than the oldest headers it builds against (glibc 2.28 to 2.31: RHEL 8,
//   Debian 11 list calls only up to their own release's kernel). Since Linux 5.1 (424) a
//   new call has the same number on every architecture; the numbers never change.
// - x86-64's older calls that aarch64's generic table never had (open, stat, access,
//   dup2, poll, vfork, ...): there openat, newfstatat, faccessat, dup3, ppoll and clone
//   carry them. On such an architecture each name is a distinct negative number that no
//   call has, so a comparison with it is false, a switch case is never taken and the call
//   tables (runtime/names/call_table.h) drop its row; nothing may pass one to the kernel.
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

#if !defined(SYS_open)
#define FANSTORE_GENERIC_SYSCALLS 1  // the generic table (aarch64): no legacy calls
#define SYS_open (-101)
#define SYS_creat (-102)
#define SYS_stat (-103)
#define SYS_lstat (-104)
#define SYS_access (-105)
#define SYS_readlink (-106)
#define SYS_dup2 (-107)
#define SYS_poll (-108)
#define SYS_select (-109)
#define SYS_unlink (-110)
#define SYS_rmdir (-111)
#define SYS_mkdir (-112)
#define SYS_mknod (-113)
#define SYS_rename (-114)
#define SYS_link (-115)
#define SYS_symlink (-116)
#define SYS_chmod (-117)
#define SYS_chown (-118)
#define SYS_lchown (-119)
#define SYS_utime (-120)
#define SYS_utimes (-121)
#define SYS_futimesat (-122)
#define SYS_vfork (-123)
#define SYS_uselib (-124)
#endif
