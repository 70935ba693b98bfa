#include "intercept/planner.h"

#include <sys/syscall.h>

#include "base/syscall_numbers.h"

namespace fanstore::intercept {
namespace {

constexpr int kJmpLen = 5;
constexpr int kMaxNeighbours = 3;
constexpr int kNrSearchDepth = 8;
static_assert(kMaxNeighbours <= kMaxFixups);

// The syscall number at insns[i], if an earlier instruction of the same straight-line run
// sets eax to an immediate and nothing in between writes rax or is entered from elsewhere.
// (Any instruction without a control transfer may lie in between; being movable is not
// needed to leave rax alone.)
int InferNr(const std::vector<Insn>& insns, size_t i, const BranchTargets& t) {
  for (size_t k = 1; k <= kNrSearchDepth && k <= i; ++k) {
    const Insn& x = insns[i - k];
    if (t.Has(insns[i - k + 1].addr)) return -1;  // flow may enter between x and the syscall
    if (!x.valid || !x.straight) return -1;
    if (x.writes_rax) return x.is_mov_eax_imm ? x.imm : -1;
  }
  return -1;
}

}  // namespace

bool MustRunInOriginalFrame(long nr) {
  return nr == SYS_clone || nr == SYS_clone3 || nr == SYS_vfork || nr == SYS_rt_sigreturn;
}

bool IsCloneFamily(long nr) {
  return nr == SYS_clone || nr == SYS_clone3 || nr == SYS_vfork;
}

const char* DecisionName(Decision d) {
  switch (d) {
    case Decision::kPatch:
      return "patched";
    case Decision::kUninteresting:
      return "left (not of interest)";
    case Decision::kOriginalFrame:
      return "left (runs in the original frame)";
    case Decision::kRefused:
      return "refused";
  }
  return "?";
}

BranchTargets CollectTargets(const std::vector<Insn>& insns, uint64_t base, uint64_t len,
                             const std::vector<uint64_t>& extra) {
  BranchTargets t(base, len);
  for (const Insn& x : insns)
    if (x.has_target) t.Add(x.target);
  for (uint64_t a : extra) t.Add(a);
  return t;
}

std::vector<SitePlan> PlanSites(const std::vector<Insn>& insns, const BranchTargets& t,
                                const Interest& interest) {
  std::vector<SitePlan> plans;
  uint64_t last_end = 0;  // end of the previous patched range
  for (size_t i = 0; i < insns.size(); ++i) {
    if (!insns[i].is_syscall) continue;
    SitePlan p;
    p.syscall_addr = insns[i].addr;
    p.nr = InferNr(insns, i, t);
    if (p.nr >= 0 && MustRunInOriginalFrame(p.nr) && !IsCloneFamily(p.nr)) {
      p.decision = Decision::kOriginalFrame;
      p.reason = "syscall " + std::to_string(p.nr) + " runs in the original frame";
      plans.push_back(p);
      continue;
    }
    if (p.nr >= 0 && !interest.Wants(p.nr) && !IsCloneFamily(p.nr)) {
      p.decision = Decision::kUninteresting;
      p.reason = "syscall " + std::to_string(p.nr) + " is not of interest";
      plans.push_back(p);
      continue;
    }
    // Candidate ranges, best first: [mov; syscall], then backward, then forward.
    size_t lo = i, hi = i;  // inclusive instruction indices of the range
    bool found = false;
    const bool sc_target = t.Has(insns[i].addr);
    if (i > 0 && insns[i - 1].is_mov_eax_imm && !sc_target) {
      lo = i - 1;
      found = true;
    }
    if (!found && !sc_target) {
      uint64_t bytes = insns[i].len;
      for (size_t k = 1; k <= kMaxNeighbours && k <= i; ++k) {
        const Insn& x = insns[i - k];
        if (!x.valid || !x.relocatable) break;
        if (k > 1 && t.Has(insns[i - k + 1].addr)) break;  // entered from elsewhere mid-range
        bytes += x.len;
        if (bytes >= kJmpLen) {
          lo = i - k;
          found = true;
          break;
        }
      }
    }
    if (!found) {
      uint64_t bytes = insns[i].len;
      for (size_t k = 1; k <= kMaxNeighbours && i + k < insns.size(); ++k) {
        const Insn& x = insns[i + k];
        if (!x.valid || !(x.relocatable || x.movable_branch) || t.Has(x.addr)) break;
        bytes += x.len;
        if (bytes >= kJmpLen) {
          lo = i;
          hi = i + k;
          found = true;
          break;
        }
        if (x.ends_flow) break;  // what follows a jmp is not this path's code
      }
    }
    if (!found) {
      p.reason = sc_target ? "the syscall is a branch target and what follows cannot move"
                           : "no relocatable neighbours without branch targets";
      plans.push_back(p);
      continue;
    }
    p.start = insns[lo].addr;
    p.end = insns[hi].addr + insns[hi].len;
    if (p.start < last_end) {
      p.start = p.end = 0;
      p.reason = "overlaps the range of the previous site";
      plans.push_back(p);
      continue;
    }
    for (size_t k = lo; k <= hi; ++k) {
      const Insn& x = insns[k];
      if (k == i || (x.rip_disp_at <= 0 && !x.movable_branch)) continue;
      Fixup& f = p.fixups[p.fixups_n++];
      f.at = static_cast<uint8_t>(x.addr - p.start);
      f.len = x.len;
      f.kind = x.movable_branch ? FixKind::kBranch : FixKind::kRipDisp;
      f.disp_at = x.movable_branch ? 0 : static_cast<uint8_t>(x.rip_disp_at);
    }
    p.decision = Decision::kPatch;
    last_end = p.end;
    plans.push_back(p);
  }
  return plans;
}

}  // namespace fanstore::intercept
