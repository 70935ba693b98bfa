// How the assembly entry saves and restores the vector state around a hook, chosen once
// from the CPU's features (x86-64; aarch64 has one way: cpu_state.cc):
//   mode 0  xmm0-15, MXCSR, x87 control word            (SSE only)
//   mode 1  ymm0-15, MXCSR, x87 control word            (AVX)
//   mode 2  zmm0-31, k0-7, MXCSR, x87 control word      (AVX-512)
//   mode 3  the whole XCR0 state with XSAVEC/XRSTOR     (FANSTORE_XSAVE=1)
// Modes 0-2 store exactly the registers compiled C++ and libc's SIMD string functions can
// change; the hook path never executes x87 arithmetic, AMX or PKRU writes. They exist
// because XSAVEC + XRSTOR cost ~140 ns per call on the target machine (see
// docs/design.md), three times the whole budget of a handled call; mode 3 remains for
// anyone who wants the architectural guarantee at that price.
// Thread-safety: written once by InitCpuState before any site is patched; read-only after.
#pragma once

#include <cstdint>

extern "C" {
extern uint64_t fanstore_xsave_size;  // save area bytes, including the alignment slack
extern uint32_t fanstore_xcr0_lo, fanstore_xcr0_hi;
extern uint8_t fanstore_vec_mode;
// Modes 1-2: XGETBV(1) is available, so the entry keeps clean upper halves clean.
extern uint8_t fanstore_xinuse;
}

namespace fanstore::intercept {
// Returns false when the CPU or OS lacks XSAVE, or the CPU LAHF/SAHF in 64-bit mode
// (interception then stays off).
// `full_xsave` selects mode 3.
bool InitCpuState(bool full_xsave);
const char* VecModeName();
}  // namespace fanstore::intercept
