#include "intercept/cpu_state.h"

#include <cpuid.h>

extern "C" {
__attribute__((visibility("hidden"))) uint64_t fanstore_xsave_size = 0;
__attribute__((visibility("hidden"))) uint32_t fanstore_xcr0_lo = 0;
__attribute__((visibility("hidden"))) uint32_t fanstore_xcr0_hi = 0;
}

namespace fanstore::intercept {

bool InitCpuState() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE)) return false;
  uint32_t lo, hi;
  asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  __cpuid_count(0xD, 0, a, b, c, d);  // ebx: size for the features enabled in XCR0
  if (b < 576) return false;
  fanstore_xcr0_lo = lo;
  fanstore_xcr0_hi = hi;
  fanstore_xsave_size = b + 64;
  return true;
}

}  // namespace fanstore::intercept
