#include "intercept/a64.h"

#include <cstring>
#include <string>

namespace fanstore::intercept::a64 {
namespace {

// aarch64's numbers (the generic table), whatever the architecture this is compiled for.
constexpr int kNrClone = 220, kNrClone3 = 435, kNrRtSigreturn = 139;
constexpr int kNrSearchDepth = 8;
constexpr uint32_t kX8 = 8, kX16 = 16, kX17 = 17, kX30 = 30, kSp = 31, kZr = 31;

uint32_t Word(const uint8_t* p) {
  uint32_t w;
  std::memcpy(&w, p, 4);
  return w;
}

int64_t SignExtend(uint64_t v, int bits) {
  const uint64_t m = uint64_t{1} << (bits - 1);
  return static_cast<int64_t>((v ^ m) - m);
}

// The target of a direct branch at `pc`, if `w` is one.
bool BranchTarget(uint32_t w, uint64_t pc, uint64_t* target) {
  int64_t off;
  if ((w & 0x7C000000) == 0x14000000) {  // b, bl: imm26
    off = SignExtend(w & 0x3FFFFFF, 26) * 4;
  } else if ((w & 0xFF000010) == 0x54000000 ||  // b.cond: imm19
             (w & 0x7E000000) == 0x34000000) {  // cbz, cbnz: imm19
    off = SignExtend((w >> 5) & 0x7FFFF, 19) * 4;
  } else if ((w & 0x7E000000) == 0x36000000) {  // tbz, tbnz: imm14
    off = SignExtend((w >> 5) & 0x3FFF, 14) * 4;
  } else {
    return false;
  }
  *target = pc + static_cast<uint64_t>(off);
  return true;
}

// Any control transfer: the direct branches, the register branches (br, blr, ret, eret)
// and the exception-generating instructions (svc, hvc, brk, hlt, ...).
bool IsControl(uint32_t w) {
  uint64_t t;
  return BranchTarget(w, 0, &t) || (w & 0xFE000000) == 0xD6000000 || (w & 0xFF000000) == 0xD4000000;
}

// May `w` write x8? True when any of its register fields (Rd/Rt, Rn for a write-back
// base, Rt2, Rs) is 8: more than the truth, never less.
bool MayWriteX8(uint32_t w) {
  return (w & 31) == kX8 || ((w >> 5) & 31) == kX8 || ((w >> 10) & 31) == kX8 ||
         ((w >> 16) & 31) == kX8;
}

// `mov w8|x8, #imm` (MOVZ, shift 0): its immediate, else -1.
int MovzX8(uint32_t w) {
  if ((w & 0x7FE0001F) != (0x52800000 | kX8)) return -1;  // sf ignored; hw must be 0
  return static_cast<int>((w >> 5) & 0xFFFF);
}

int InferNr(const uint8_t* text, size_t i, uint64_t addr, const BranchTargets& t) {
  for (size_t k = 1; k <= kNrSearchDepth && k <= i; ++k) {
    if (t.Has(addr + (i - k + 1) * 4)) return -1;  // flow may enter between here and the svc
    const uint32_t w = Word(text + (i - k) * 4);
    if (IsControl(w)) return -1;
    const int imm = MovzX8(w);
    if (imm >= 0) return imm;
    if (MayWriteX8(w)) return -1;
  }
  return -1;
}

// Encodings (Arm ARM, A64 base instructions).
uint32_t Stp64Pre(uint32_t t, uint32_t t2, int imm) {  // stp xt,xt2,[sp,#imm]!
  return 0xA9800000 | ((static_cast<uint32_t>(imm / 8) & 0x7F) << 15) | (t2 << 10) | (kSp << 5) | t;
}
uint32_t Ldp64Post(uint32_t t, uint32_t t2, int imm) {  // ldp xt,xt2,[sp],#imm
  return 0xA8C00000 | ((static_cast<uint32_t>(imm / 8) & 0x7F) << 15) | (t2 << 10) | (kSp << 5) | t;
}
uint32_t StrPre(uint32_t t, int imm) {  // str xt,[sp,#imm]!
  return 0xF8000C00 | ((static_cast<uint32_t>(imm) & 0x1FF) << 12) | (kSp << 5) | t;
}
uint32_t LdrPost(uint32_t t, int imm) {  // ldr xt,[sp],#imm
  return 0xF8400400 | ((static_cast<uint32_t>(imm) & 0x1FF) << 12) | (kSp << 5) | t;
}
uint32_t MrsNzcv(uint32_t t) {
  return 0xD53B4200 | t;
}
uint32_t MsrNzcv(uint32_t t) {
  return 0xD51B4200 | t;
}
uint32_t MrsTpidr(uint32_t t) {  // mrs xt,tpidr_el0
  return 0xD53BD040 | t;
}
uint32_t AddImm(uint32_t d, uint32_t n, uint32_t imm12, bool lsl12) {  // add xd,xn,#imm{,lsl 12}
  return 0x91000000 | (lsl12 ? 1u << 22 : 0) | ((imm12 & 0xFFF) << 10) | (n << 5) | d;
}
uint32_t CmpImm(uint32_t n, uint32_t imm12) {  // cmp xn,#imm (subs xzr,xn,#imm)
  return 0xF1000000 | ((imm12 & 0xFFF) << 10) | (n << 5) | kZr;
}
uint32_t MovzW(uint32_t d, uint32_t imm16) {
  return 0x52800000 | ((imm16 & 0xFFFF) << 5) | d;
}
uint32_t Strb(uint32_t t, uint32_t n, uint32_t imm12) {  // strb wt,[xn,#imm]
  return 0x39000000 | ((imm12 & 0xFFF) << 10) | (n << 5) | t;
}
uint32_t Blr(uint32_t n) {
  return 0xD63F0000 | (n << 5);
}
uint32_t LdrLiteral(uint32_t t, int64_t words) {  // ldr xt,.+words*4
  return 0x58000000 | ((static_cast<uint32_t>(words) & 0x7FFFF) << 5) | t;
}
uint32_t B(int64_t words) {
  return 0x14000000 | (static_cast<uint32_t>(words) & 0x3FFFFFF);
}
uint32_t BEq(int64_t words) {  // b.eq
  return 0x54000000 | ((static_cast<uint32_t>(words) & 0x7FFFF) << 5);
}
uint32_t Cbz(uint32_t t, int64_t words) {  // cbz xt
  return 0xB4000000 | ((static_cast<uint32_t>(words) & 0x7FFFF) << 5) | t;
}

class Code {
 public:
  explicit Code(uint64_t base) : base_(base) {}
  void Put(uint32_t w) { words_.push_back(w); }
  size_t Here() const { return words_.size(); }
  uint64_t AddrOf(size_t i) const { return base_ + i * 4; }
  void Patch(size_t i, uint32_t w) { words_[i] = w; }
  std::vector<uint8_t> Bytes() const {
    std::vector<uint8_t> b(words_.size() * 4);
    if (!b.empty()) std::memcpy(b.data(), words_.data(), b.size());
    return b;
  }

 private:
  uint64_t base_;
  std::vector<uint32_t> words_;
};

// x<reg> = the clone mark's page: tpidr_el0 + the offset's high part (the low 12 bits go
// into the strb).
void PutMarkBase(Code& c, uint32_t reg, int32_t mark_tls) {
  c.Put(MrsTpidr(reg));
  if (mark_tls >> 12) c.Put(AddImm(reg, reg, static_cast<uint32_t>(mark_tls) >> 12, true));
}

// The clone-family call in place: mark 1, svc, mark 0 unless this is the child (x0 == 0).
void PutClone(Code& c, int32_t mark_tls) {
  const uint32_t lo = static_cast<uint32_t>(mark_tls) & 0xFFF;
  c.Put(Stp64Pre(kX16, kX17, -16));
  PutMarkBase(c, kX16, mark_tls);
  c.Put(MovzW(kX17, 1));
  c.Put(Strb(kX17, kX16, lo));
  c.Put(Ldp64Post(kX16, kX17, 16));
  c.Put(kSvc0);
  c.Put(StrPre(kX8, -16));  // (the child's stack may be new: free below its sp as well)
  PutMarkBase(c, kX8, mark_tls);
  c.Put(Cbz(0, 2));
  c.Put(Strb(kZr, kX8, lo));
  c.Put(LdrPost(kX8, 16));
}

}  // namespace

bool BranchReaches(uint64_t from, uint64_t to) {
  const int64_t d = static_cast<int64_t>(to - from);
  return d >= -(int64_t{1} << 27) && d < (int64_t{1} << 27) && (d & 3) == 0;
}

void AddTargets(const uint8_t* text, size_t len, uint64_t addr, BranchTargets* t) {
  for (size_t i = 0; i + 4 <= len; i += 4) {
    uint64_t target;
    if (BranchTarget(Word(text + i), addr + i, &target)) t->Add(target);
  }
}

std::vector<SitePlan> PlanSites(const uint8_t* text, size_t len, uint64_t addr,
                                const BranchTargets& t, const Interest& interest) {
  std::vector<SitePlan> plans;
  for (size_t i = 0; (i + 1) * 4 <= len; ++i) {
    if (Word(text + i * 4) != kSvc0) continue;
    SitePlan p;
    p.syscall_addr = addr + i * 4;
    p.nr = InferNr(text, i, addr, t);
    const bool clone = p.nr == kNrClone || p.nr == kNrClone3;
    if (p.nr == kNrRtSigreturn) {
      p.decision = Decision::kOriginalFrame;
      p.reason = "syscall " + std::to_string(p.nr) + " runs in the original frame";
    } else if (p.nr >= 0 && !clone && !interest.Wants(p.nr)) {
      p.decision = Decision::kUninteresting;
      p.reason = "syscall " + std::to_string(p.nr) + " is not of interest";
    } else {
      p.decision = Decision::kPatch;
      p.start = p.syscall_addr;
      p.end = p.start + 4;
    }
    plans.push_back(p);
  }
  return plans;
}

std::vector<uint8_t> BuildStub(const SitePlan& p, uint64_t stub_addr, uint64_t entry_slot,
                               int32_t mark_tls) {
  if (mark_tls < 0 || mark_tls >= (1 << 24)) return {};
  Code c(stub_addr);
  auto back = [&]() -> bool {  // b P+4
    const uint64_t from = c.AddrOf(c.Here());
    if (!BranchReaches(from, p.end)) return false;
    c.Put(B(static_cast<int64_t>(p.end - from) / 4));
    return true;
  };
  if (p.nr == kNrClone || p.nr == kNrClone3) {
    PutClone(c, mark_tls);
    return back() ? c.Bytes() : std::vector<uint8_t>{};
  }
  std::vector<size_t> to_direct;
  if (p.nr < 0) {
    c.Put(Stp64Pre(kX16, kX17, -16));
    c.Put(MrsNzcv(kX17));
    for (int nr : {kNrClone, kNrClone3, kNrRtSigreturn}) {
      c.Put(CmpImm(kX8, static_cast<uint32_t>(nr)));
      to_direct.push_back(c.Here());
      c.Put(0);  // b.eq .Ldirect, below
    }
    c.Put(MsrNzcv(kX17));
    c.Put(Ldp64Post(kX16, kX17, 16));
  }
  c.Put(Stp64Pre(kX16, kX30, -16));
  const uint64_t ldr_at = c.AddrOf(c.Here());
  const int64_t slot_off = static_cast<int64_t>(entry_slot - ldr_at);
  if (slot_off < -(int64_t{1} << 20) || slot_off >= (int64_t{1} << 20) || (slot_off & 3)) return {};
  c.Put(LdrLiteral(kX16, slot_off / 4));
  c.Put(Blr(kX16));
  c.Put(Ldp64Post(kX16, kX30, 16));
  if (!back()) return {};
  if (p.nr < 0) {
    const size_t direct = c.Here();
    for (size_t at : to_direct) c.Patch(at, BEq(static_cast<int64_t>(direct - at)));
    c.Put(MsrNzcv(kX17));
    c.Put(Ldp64Post(kX16, kX17, 16));
    PutClone(c, mark_tls);  // (rt_sigreturn here too: it returns through its frame, not here)
    if (!back()) return {};
  }
  return c.Bytes();
}

std::vector<uint8_t> BuildPatch(const SitePlan& p, uint64_t stub_addr) {
  const uint32_t w = B(static_cast<int64_t>(stub_addr - p.start) / 4);
  std::vector<uint8_t> b(4);
  std::memcpy(b.data(), &w, 4);
  return b;
}

}  // namespace fanstore::intercept::a64
