#include "intercept/insn.h"

#include <Zydis/Zydis.h>

namespace fanstore::intercept {
namespace {

bool IsRax(ZydisRegister r) {
  return r == ZYDIS_REGISTER_RAX || r == ZYDIS_REGISTER_EAX || r == ZYDIS_REGISTER_AX ||
         r == ZYDIS_REGISTER_AL || r == ZYDIS_REGISTER_AH;
}

}  // namespace

std::vector<Insn> DecodeRegion(const uint8_t* code, size_t len, uint64_t addr) {
  ZydisDecoder dec;
  ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
  std::vector<Insn> out;
  out.reserve(len / 4);
  ZydisDecodedInstruction in;
  ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
  size_t off = 0;
  while (off < len) {
    Insn x;
    x.addr = addr + off;
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, code + off, len - off, &in, ops))) {
      x.len = 1;
      x.valid = false;
      out.push_back(x);
      off += 1;
      continue;
    }
    x.len = in.length;
    const auto cat = in.meta.category;
    x.is_syscall = in.mnemonic == ZYDIS_MNEMONIC_SYSCALL;
    x.is_mov_eax_imm = in.length == 5 && code[off] == 0xB8;
    if (x.is_mov_eax_imm) x.imm = static_cast<int32_t>(in.raw.imm[0].value.s);
    for (uint8_t i = 0; i < in.operand_count; ++i) {
      const ZydisDecodedOperand& o = ops[i];
      if ((o.actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) && o.type == ZYDIS_OPERAND_TYPE_REGISTER &&
          IsRax(o.reg.value))
        x.writes_rax = true;
    }
    const bool control = cat == ZYDIS_CATEGORY_COND_BR || cat == ZYDIS_CATEGORY_UNCOND_BR ||
                         cat == ZYDIS_CATEGORY_CALL || cat == ZYDIS_CATEGORY_RET ||
                         cat == ZYDIS_CATEGORY_SYSCALL || cat == ZYDIS_CATEGORY_INTERRUPT ||
                         cat == ZYDIS_CATEGORY_SYSTEM;
    x.relocatable = !control && !(in.attributes & ZYDIS_ATTRIB_IS_RELATIVE) && !x.is_syscall;
    if ((cat == ZYDIS_CATEGORY_COND_BR || cat == ZYDIS_CATEGORY_UNCOND_BR ||
         cat == ZYDIS_CATEGORY_CALL) &&
        in.raw.imm[0].is_relative) {
      x.has_target = true;
      x.target = x.addr + in.length + static_cast<uint64_t>(in.raw.imm[0].value.s);
    }
    x.ends_flow = cat == ZYDIS_CATEGORY_RET || cat == ZYDIS_CATEGORY_UNCOND_BR ||
                  in.mnemonic == ZYDIS_MNEMONIC_UD2 || in.mnemonic == ZYDIS_MNEMONIC_HLT;
    out.push_back(x);
    off += in.length;
  }
  return out;
}

}  // namespace fanstore::intercept
