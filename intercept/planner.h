// The patch planner: a pure function from decoded instructions and branch targets to one
// decision per `syscall` instruction. A patched site is a range [start, end) of at least 5
// whole instructions' bytes that becomes `jmp stub` (+ int3 padding); the stub re-runs the
// range's other instructions ("pre" before the syscall, "post" after it). Rules:
//  - preferred: `mov $NR,%eax; syscall` (7 bytes);
//  - otherwise relocatable neighbours before the syscall (up to 3), or after it (up to 3);
//  - no instruction boundary inside the range except `start` may be a branch target;
//  - a copied instruction is position independent, or is one the stub re-encodes for its
//    new address (a Fixup): one with a RIP-relative memory operand (`lea X(%rip),%rdi`,
//    its disp32 recomputed), or, after the syscall, a plain jmp/jcc (re-encoded as rel32
//    to the same target; nothing after an unconditional jmp joins the range);
//  - a site whose number is known and not of interest is left alone; rt_sigreturn sites
//    are never patched (it must run in the original frame); clone, clone3 and vfork sites
//    are always patched, with a stub that runs the call itself, on no stack, and then writes
//    the clone mark (clone_mark.h); a site with an unknown number gets a stub that checks
//    for all four at run time;
//  - anything else is refused with a reason, never patched unsafely.
// Thread-safety: pure functions.
#pragma once

#include <array>
#include <bitset>
#include <cstdint>
#include <string>
#include <vector>

#include "intercept/call_abi.h"
#include "intercept/insn.h"

namespace fanstore::intercept {

struct Interest {
  std::bitset<kMaxSyscallNr> nrs;
  bool all = false;
  bool Wants(int nr) const { return all || (nr >= 0 && nr < kMaxSyscallNr && nrs.test(nr)); }
};

// True for the calls that must execute their `syscall` on the caller's own stack frame.
bool MustRunInOriginalFrame(long nr);
// clone, clone3, vfork: patched with a direct stub that writes the clone mark.
bool IsCloneFamily(long nr);

class BranchTargets {
 public:
  BranchTargets(uint64_t base, uint64_t len) : base_(base), bits_(len, false) {}
  void Add(uint64_t addr) {
    if (addr >= base_ && addr - base_ < bits_.size()) bits_[addr - base_] = true;
  }
  bool Has(uint64_t addr) const {
    return addr >= base_ && addr - base_ < bits_.size() && bits_[addr - base_];
  }

 private:
  uint64_t base_;
  std::vector<bool> bits_;
};

// Direct jump/call targets of `insns`, plus `extra` (e.g. exported function entries).
BranchTargets CollectTargets(const std::vector<Insn>& insns, uint64_t base, uint64_t len,
                             const std::vector<uint64_t>& extra);

enum class Decision { kPatch, kUninteresting, kOriginalFrame, kRefused };
const char* DecisionName(Decision d);

// One instruction of a patched range that the stub cannot copy byte for byte.
enum class FixKind : uint8_t { kRipDisp = 1, kBranch = 2 };
struct Fixup {
  uint8_t at = 0, len = 0;  // the instruction's offset from the range's start, its length
  uint8_t disp_at = 0;      // kRipDisp: the offset of its disp32 within the instruction
  FixKind kind = FixKind::kRipDisp;
  bool operator==(const Fixup&) const = default;
};
inline constexpr int kMaxFixups = 3;  // at most every neighbour of a range

struct SitePlan {
  uint64_t syscall_addr = 0;
  uint64_t start = 0, end = 0;  // the patched range (kPatch only)
  int nr = -1;                  // the syscall number if known from the code, else -1
  Decision decision = Decision::kRefused;
  std::string reason;    // for everything but kPatch
  uint8_t fixups_n = 0;  // kPatch: fixups[0, fixups_n), in address order
  std::array<Fixup, kMaxFixups> fixups{};
  bool operator==(const SitePlan&) const = default;
};

std::vector<SitePlan> PlanSites(const std::vector<Insn>& insns, const BranchTargets& targets,
                                const Interest& interest);

}  // namespace fanstore::intercept
