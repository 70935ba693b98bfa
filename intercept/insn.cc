#include "intercept/insn.h"

#include <Zydis/Zydis.h>
#include <dlfcn.h>

#include <cstdio>

namespace fanstore::intercept {
namespace {

using InitFn = decltype(&ZydisDecoderInit);
using DecodeFn = decltype(&ZydisDecoderDecodeFull);
InitFn g_init = nullptr;
DecodeFn g_decode = nullptr;

bool LoadZydis(const char** error) {
  if (g_decode) return true;
  // Any Zydis 4 the system has, by its soname (Debian 12: libZydis.so.4.0; 13 and unstable:
  // 4.1), the -dev package's link last. Loaded lazily: only a process that plans a libc
  // pays for it, and a machine without it still runs every program (uninterposed).
  void* h = nullptr;
  char soname[32];
  for (int minor = 9; !h && minor >= 0; --minor) {
    std::snprintf(soname, sizeof soname, "libZydis.so.4.%d", minor);
    h = ::dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  }
  if (!h) h = ::dlopen("libZydis.so.4", RTLD_NOW | RTLD_LOCAL);
  if (!h) h = ::dlopen("libZydis.so", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    if (error) *error = "cannot load libZydis.so.4.x (Debian package libzydis4)";
    return false;
  }
  g_init = reinterpret_cast<InitFn>(::dlsym(h, "ZydisDecoderInit"));
  g_decode = reinterpret_cast<DecodeFn>(::dlsym(h, "ZydisDecoderDecodeFull"));
  if (!g_init || !g_decode) {
    if (error) *error = "libZydis lacks ZydisDecoderDecodeFull (not Zydis 4?)";
    g_decode = nullptr;
    return false;
  }
  return true;
}

bool IsRax(ZydisRegister r) {
  return r == ZYDIS_REGISTER_RAX || r == ZYDIS_REGISTER_EAX || r == ZYDIS_REGISTER_AX ||
         r == ZYDIS_REGISTER_AL || r == ZYDIS_REGISTER_AH;
}

}  // namespace

bool DecodeRegion(const uint8_t* code, size_t len, uint64_t addr, std::vector<Insn>* result,
                  const char** error) {
  if (!LoadZydis(error)) return false;
  ZydisDecoder dec;
  g_init(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
  std::vector<Insn>& out = *result;
  out.clear();
  out.reserve(len / 4);
  ZydisDecodedInstruction in;
  ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
  size_t off = 0;
  while (off < len) {
    Insn x;
    x.addr = addr + off;
    if (!ZYAN_SUCCESS(g_decode(&dec, code + off, len - off, &in, ops))) {
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
    x.straight = !control && !x.is_syscall;
    bool rip_memory = false;
    for (uint8_t i = 0; i < in.operand_count; ++i)
      if (ops[i].type == ZYDIS_OPERAND_TYPE_MEMORY && ops[i].mem.base == ZYDIS_REGISTER_RIP)
        rip_memory = true;
    if (rip_memory && in.raw.disp.size == 32 && in.raw.disp.offset > 0)
      x.rip_disp_at = static_cast<int8_t>(in.raw.disp.offset);
    // Relative in any other way (or a RIP operand we cannot locate): not movable.
    x.relocatable = x.straight && (!(in.attributes & ZYDIS_ATTRIB_IS_RELATIVE) ||
                                   (rip_memory && x.rip_disp_at > 0));
    if ((cat == ZYDIS_CATEGORY_COND_BR || cat == ZYDIS_CATEGORY_UNCOND_BR ||
         cat == ZYDIS_CATEGORY_CALL) &&
        in.raw.imm[0].is_relative) {
      x.has_target = true;
      x.target = x.addr + in.length + static_cast<uint64_t>(in.raw.imm[0].value.s);
    }
    // Only the plain encodings: EB/E9 (jmp), 7x/0F 8x (jcc), no prefix before them.
    const uint8_t b0 = code[off];
    x.movable_branch = x.has_target && cat != ZYDIS_CATEGORY_CALL &&
                       ((in.length == 2 && (b0 == 0xEB || (b0 & 0xF0) == 0x70)) ||
                        (in.length == 5 && b0 == 0xE9) ||
                        (in.length == 6 && b0 == 0x0F && (code[off + 1] & 0xF0) == 0x80));
    x.ends_flow = cat == ZYDIS_CATEGORY_RET || cat == ZYDIS_CATEGORY_UNCOND_BR ||
                  in.mnemonic == ZYDIS_MNEMONIC_UD2 || in.mnemonic == ZYDIS_MNEMONIC_HLT;
    out.push_back(x);
    off += in.length;
  }
  return true;
}

}  // namespace fanstore::intercept
