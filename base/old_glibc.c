// Linked into every ELF file of a bundle build (cmake/bundle.cmake) and nowhere else. A
// bundle links against Debian 11's glibc (2.31), so that each reference binds to the
// oldest version of its symbol, while gcc 12's libstdc++.a and libgcc_eh.a were compiled
// against Debian 12's (2.36) and name a few things that 2.28 (RHEL 8, the oldest glibc a
// bundle serves) lacks. Each is defined here, hidden, so that the link binds those names
// to these and the ELF files need nothing newer than GLIBC_2.28 (tests/bundle/elf_test.sh):
// - __libc_single_threaded (2.32): libstdc++ skips atomic reference counts while it is
//   true; 0 keeps them always, which is correct in any process.
// - arc4random (2.36): std::random_device's default source; getrandom (2.25) instead.
// - _dl_find_object (2.35): the unwinder's way to an address's .eh_frame_hdr; found here
//   with dl_iterate_phdr, as libgcc itself does where glibc lacks it.
// - pthread_cond_clockwait (2.30): condition waits on the steady clock.
// - exp, exp2, log, log2, pow: glibc 2.29 gave these new versions (no SVID error
//   handling); here they call the GLIBC_2.2.5 ones, which every glibc since has kept.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define HIDDEN __attribute__((visibility("hidden")))

HIDDEN char __libc_single_threaded = 0;

HIDDEN uint32_t arc4random(void) {
  uint32_t v;
  while (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v) {
  }
  return v;
}

struct FindQuery {
  uintptr_t pc;
  struct dl_find_object* out;
  int found;
};

static int FindInObject(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  struct FindQuery* q = data;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  int contains = 0;
  const ElfW(Phdr)* eh = NULL;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)* p = &info->dlpi_phdr[i];
    if (p->p_type == PT_LOAD) {
      uintptr_t start = info->dlpi_addr + p->p_vaddr, end = start + p->p_memsz;
      if (start < lo) lo = start;
      if (end > hi) hi = end;
      if (q->pc >= start && q->pc < end) contains = 1;
    } else if (p->p_type == PT_GNU_EH_FRAME) {
      eh = p;
    }
  }
  if (!contains) return 0;
  memset(q->out, 0, sizeof *q->out);
  q->out->dlfo_map_start = (void*)lo;
  q->out->dlfo_map_end = (void*)hi;
  q->out->dlfo_eh_frame = eh ? (void*)(info->dlpi_addr + eh->p_vaddr) : NULL;
  q->found = 1;
  return 1;
}

HIDDEN int _dl_find_object(void* pc, struct dl_find_object* out) {
  struct FindQuery q = {(uintptr_t)pc, out, 0};
  dl_iterate_phdr(FindInObject, &q);
  return q.found ? 0 : -1;
}

#if defined(__x86_64__)
#define OLD_LIBM "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define OLD_LIBM "GLIBC_2.17"
#endif
#define OLD_VERSION_OF(name, params, args)              \
  double old_##name params;                             \
  __asm__(".symver old_" #name "," #name "@" OLD_LIBM); \
  HIDDEN double name params {                           \
    return old_##name args;                             \
  }
OLD_VERSION_OF(exp, (double x), (x))
OLD_VERSION_OF(exp2, (double x), (x))
OLD_VERSION_OF(log, (double x), (x))
OLD_VERSION_OF(log2, (double x), (x))
OLD_VERSION_OF(pow, (double x, double y), (x, y))

// std::condition_variable's waits on the steady clock call pthread_cond_clockwait. A
// deadline on `clock` becomes the same distance from now on the condition's own clock
// (CLOCK_REALTIME, as every condition FanStore makes), as libstdc++ does without it.
HIDDEN int pthread_cond_clockwait(pthread_cond_t* cond, pthread_mutex_t* mutex, clockid_t clock,
                                  const struct timespec* abstime) {
  const long long kSecond = 1000000000LL;
  struct timespec now, deadline;
  clock_gettime(clock, &now);
  long long left =
      (long long)(abstime->tv_sec - now.tv_sec) * kSecond + (abstime->tv_nsec - now.tv_nsec);
  if (left < 0) left = 0;
  clock_gettime(CLOCK_REALTIME, &deadline);
  const long long ns = deadline.tv_nsec + left % kSecond;
  deadline.tv_sec += (time_t)(left / kSecond + ns / kSecond);
  deadline.tv_nsec = (long)(ns % kSecond);
  return pthread_cond_timedwait(cond, mutex, &deadline);
}
