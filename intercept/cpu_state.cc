#include "intercept/cpu_state.h"

#include <cpuid.h>

extern "C" {
__attribute__((visibility("hidden"))) uint64_t fanstore_xsave_size = 0;
__attribute__((visibility("hidden"))) uint32_t fanstore_xcr0_lo = 0;
__attribute__((visibility("hidden"))) uint32_t fanstore_xcr0_hi = 0;
__attribute__((visibility("hidden"))) uint8_t fanstore_vec_mode = 3;
__attribute__((visibility("hidden"))) uint8_t fanstore_xinuse = 0;
}

namespace fanstore::intercept {

bool InitCpuState(bool full_xsave) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE)) return false;
  // The entry's fast return restores the flags with SAHF (entry_asm.S), which 64-bit mode
  // has where CPUID.80000001H:ECX bit 0 says so (every x86-64 core since 2006).
  if (!__get_cpuid(0x80000001, &a, &b, &c, &d) || !(c & bit_LAHF_LM)) return false;
  uint32_t lo, hi;
  asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  __cpuid_count(0xD, 0, a, b, c, d);  // ebx: size for the features enabled in XCR0
  if (b < 576) return false;
  fanstore_xcr0_lo = lo;
  fanstore_xcr0_hi = hi;
  constexpr uint32_t kAvx = 1u << 2, kAvx512 = (1u << 5) | (1u << 6) | (1u << 7);
  unsigned a7, b7, c7, d7;
  const bool leaf_d1 = __get_cpuid_count(0xD, 1, &a7, &b7, &c7, &d7);
  const bool xsavec = leaf_d1 && (a7 & (1u << 1));
  // XGETBV with ECX = 1 (the in-use bitmap) exists where CPUID.(0xD,1):EAX bit 2 says so.
  const bool xgetbv1 = leaf_d1 && (a7 & (1u << 2));
  const bool avx512f = __get_cpuid_count(7, 0, &a7, &b7, &c7, &d7) && (b7 & (1u << 16));
  if (full_xsave && xsavec) {
    fanstore_vec_mode = 3;
    fanstore_xsave_size = b + 64;
  } else {
    fanstore_vec_mode = (lo & kAvx512) == kAvx512 && avx512f ? 2 : (lo & kAvx) ? 1 : 0;
    fanstore_xsave_size = 2176 + 64;  // zmm0-31 (2048) + k0-7 (64) + MXCSR, FCW, XINUSE
    fanstore_xinuse = fanstore_vec_mode > 0 && xgetbv1 ? 1 : 0;
  }
  return true;
}

const char* VecModeName() {
  switch (fanstore_vec_mode) {
    case 0:
      return "xmm0-15";
    case 1:
      return "ymm0-15";
    case 2:
      return "zmm0-31+k0-7";
    default:
      return "XSAVEC";
  }
}

}  // namespace fanstore::intercept
