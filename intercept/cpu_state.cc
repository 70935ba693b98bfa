#include "intercept/cpu_state.h"

// Written by InitCpuState; the x86-64 entry reads them, the patcher reports the save size.
extern "C" {
__attribute__((visibility("hidden"))) uint64_t fanstore_xsave_size = 0;
__attribute__((visibility("hidden"))) uint32_t fanstore_xcr0_lo = 0;
__attribute__((visibility("hidden"))) uint32_t fanstore_xcr0_hi = 0;
__attribute__((visibility("hidden"))) uint8_t fanstore_vec_mode = 3;
__attribute__((visibility("hidden"))) uint8_t fanstore_xinuse = 0;
}

#if defined(__x86_64__)
#include <cpuid.h>

// glibc 2.33+ (<sys/platform/x86.h>): the CPUID leaves ld.so read at start, by index
// (0: leaf 1, 1: leaf 7, 2: leaf 0x80000001, 3: leaf 0xD with ECX = 1), each as eax, ebx,
// ecx, edx. Declared here, not by including the header, which clang cannot compile as C++
// (its _Bool); weak, so that the library still loads with an older glibc, which lacks it
// (then CPUID is asked here).
extern "C" {
struct FanstoreCpuidLeaf {
  unsigned cpuid[4];
  unsigned active[4];
};
const FanstoreCpuidLeaf* __x86_get_cpuid_feature_leaf(unsigned index) __attribute__((weak));
}

namespace fanstore::intercept {
namespace {

// What InitCpuState needs to know of the CPU.
struct CpuFacts {
  bool osxsave = false;  // CPUID.1:ECX.OSXSAVE: XGETBV may be used
  bool lahf = false;     // CPUID.80000001H:ECX bit 0: LAHF/SAHF in 64-bit mode
  bool xsavec = false;   // CPUID.(0xD,1):EAX bit 1
  bool xgetbv1 = false;  // CPUID.(0xD,1):EAX bit 2: XGETBV with ECX = 1 (the in-use bitmap)
  bool avx512f = false;  // CPUID.(7,0):EBX bit 16
};

// From ld.so's copy of the leaves where glibc has one: each CPUID is a VM exit, ~12 us
// under nested virtualisation, and every process the runtime starts in asks these.
CpuFacts ReadCpuFacts() {
  CpuFacts f;
  if (&__x86_get_cpuid_feature_leaf != nullptr) {
    const unsigned l1_ecx = __x86_get_cpuid_feature_leaf(0)->cpuid[2];
    const unsigned l7_ebx = __x86_get_cpuid_feature_leaf(1)->cpuid[1];
    const unsigned ext_ecx = __x86_get_cpuid_feature_leaf(2)->cpuid[2];
    const unsigned d1_eax = __x86_get_cpuid_feature_leaf(3)->cpuid[0];
    f.osxsave = l1_ecx & bit_OSXSAVE;
    f.lahf = ext_ecx & bit_LAHF_LM;
    f.xsavec = d1_eax & (1u << 1);
    f.xgetbv1 = d1_eax & (1u << 2);
    f.avx512f = l7_ebx & (1u << 16);
    return f;
  }
  unsigned a, b, c, d;
  f.osxsave = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_OSXSAVE);
  f.lahf = __get_cpuid(0x80000001, &a, &b, &c, &d) && (c & bit_LAHF_LM);
  if (__get_cpuid_count(0xD, 1, &a, &b, &c, &d)) {
    f.xsavec = a & (1u << 1);
    f.xgetbv1 = a & (1u << 2);
  }
  f.avx512f = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 16));
  return f;
}

}  // namespace

bool InitCpuState(bool full_xsave) {
  const CpuFacts f = ReadCpuFacts();
  // The entry's fast return restores the flags with SAHF (entry_asm.S), which 64-bit mode
  // has where the CPU says so (every x86-64 core since 2006).
  if (!f.osxsave || !f.lahf) return false;
  uint32_t lo, hi;
  asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  fanstore_xcr0_lo = lo;
  fanstore_xcr0_hi = hi;
  constexpr uint32_t kX87Sse = 3, kAvx = 1u << 2, kAvx512 = (1u << 5) | (1u << 6) | (1u << 7);
  if ((lo & kX87Sse) != kX87Sse) return false;  // the OS saves no SSE state
  if (full_xsave && f.xsavec) {
    unsigned a, b, c, d;
    __cpuid_count(0xD, 0, a, b, c, d);  // ebx: size for the features enabled in XCR0
    if (b < 576) return false;
    fanstore_vec_mode = 3;
    fanstore_xsave_size = b + 64;
  } else {
    fanstore_vec_mode = (lo & kAvx512) == kAvx512 && f.avx512f ? 2 : (lo & kAvx) ? 1 : 0;
    fanstore_xsave_size = 2176 + 64;  // zmm0-31 (2048) + k0-7 (64) + MXCSR, FCW, XINUSE
    fanstore_xinuse = fanstore_vec_mode > 0 && f.xgetbv1 ? 1 : 0;
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

#elif defined(__aarch64__)

// aarch64: the entry (entry_asm_aarch64.S) saves q0-q31, FPCR and FPSR, all a system call
// keeps (it discards SVE state beyond them); nothing to choose.
namespace fanstore::intercept {

bool InitCpuState(bool) {
  fanstore_xsave_size = 528;
  fanstore_vec_mode = 0;
  return true;
}

const char* VecModeName() {
  return "q0-31+FPCR+FPSR";
}

}  // namespace fanstore::intercept
#endif
