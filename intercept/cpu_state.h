// The extended-state (XSAVE) parameters the assembly entry uses to save and restore every
// vector register: the XCR0 feature mask and the save area size for it (CPUID 0xD).
// Thread-safety: written once by InitCpuState before any site is patched; read-only after.
#pragma once

#include <cstdint>

extern "C" {
extern uint64_t fanstore_xsave_size;  // bytes, including the 64-byte alignment slack
extern uint32_t fanstore_xcr0_lo, fanstore_xcr0_hi;
}

namespace fanstore::intercept {
// Returns false when the CPU or OS lacks XSAVE (interception then stays off).
bool InitCpuState();
}  // namespace fanstore::intercept
