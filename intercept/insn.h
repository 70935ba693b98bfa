// Insn: what the patch planner needs to know about one decoded x86-64 instruction, and the
// Zydis-based linear decoder of a code region.
// Thread-safety: DecodeRegion is reentrant (the decoder is a local value).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace fanstore::intercept {

struct Insn {
  uint64_t addr = 0;  // address of the first byte
  uint8_t len = 0;
  bool is_syscall = false;
  bool is_mov_eax_imm = false;  // mov $imm32,%eax (B8 id): sets the syscall number
  bool writes_rax = false;      // writes any part of rax/eax/ax/al
  bool relocatable = false;     // can run at another address: unchanged, or with its
                                // RIP-relative displacement recomputed (rip_disp_at)
  bool straight = false;        // no control transfer (a run of these has one entry)
  int8_t rip_disp_at = -1;      // offset of the disp32 of a RIP-relative memory operand
  bool movable_branch = false;  // jmp/jcc rel8/rel32 with no prefix: a stub can re-encode it
  bool has_target = false;      // a relative jump/call: `target` is where it goes
  bool ends_flow = false;       // ret, jmp, ud2, hlt: no fall-through
  int32_t imm = 0;              // for is_mov_eax_imm
  uint64_t target = 0;
  bool valid = true;  // false: bytes Zydis could not decode (one byte consumed)
};

// Decodes `len` bytes at `code` linearly into `out`; `addr` is the address of code[0] as
// the instructions see it (the live address, or any base in tests). Zydis is loaded with
// dlopen on first use, so processes that start from a cached plan never load it. Returns
// false (with `error` set) if libZydis cannot be loaded.
bool DecodeRegion(const uint8_t* code, size_t len, uint64_t addr, std::vector<Insn>* out,
                  const char** error = nullptr);

}  // namespace fanstore::intercept
