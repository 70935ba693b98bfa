// aarch64: planning a libc's `svc #0` sites and the stubs that replace them. Pure code,
// compiled on every architecture (its unit tests run on x86-64 too); the patcher uses it
// on aarch64.
// Where it differs from x86-64 (planner.h, stub.h), and why:
//  - Instructions are 4 bytes and aligned, so the text decodes without a decoder library
//    and a site is the `svc` alone: it becomes `b stub` (reach +-128 MiB), no neighbour
//    moves and no instruction is re-encoded. A branch to the site lands on the `b`.
//  - The number is in x8, set by `mov w8|x8, #imm` (MOVZ) some instructions before; any
//    instruction in between that may write x8 (any of its register fields is 8: an
//    over-approximation) or is entered from elsewhere leaves it unknown.
//  - Linux aarch64 has no red zone, and the kernel preserves every register but x0 and
//    the flags across `svc`, so a stub pushes what it uses and restores it, flags
//    included. Layout at S, for the site at P:
//      [stp x16,x17,[sp,#-16]!; mrs x17,nzcv; (cmp x8,#N; b.eq .Ldirect)x3;
//       msr nzcv,x17; ldp x16,x17,[sp],#16]      only if the number is unknown
//      stp x16,x30,[sp,#-16]!; ldr x16,slot; blr x16; ldp x16,x30,[sp],#16; b P+4
//      [.Ldirect: msr nzcv,x17; ldp x16,x17,[sp],#16; <clone>; b P+4]
//    The entry (entry_asm_aarch64.S) takes x8 and x0-x5, makes or answers the call and
//    returns with only x0 changed.
//  - A clone or clone3 site (number known) gets only <clone>: the mark set to 1 with two
//    registers saved and restored on the stack, `svc #0`, then, on whatever stack the
//    child has (it is free below sp), x8 is saved, used to clear the mark unless x0 == 0,
//    and restored: the call runs in place, as on x86-64 (clone_mark.h). aarch64 has no
//    vfork call (glibc's vfork is clone); rt_sigreturn sites are left.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "intercept/planner.h"

namespace fanstore::intercept::a64 {

inline constexpr uint32_t kSvc0 = 0xD4000001;

// Adds the targets of the direct branches (b, bl, b.cond, cbz/cbnz, tbz/tbnz) in `text`
// (whose first byte is at `addr`) to `t`.
void AddTargets(const uint8_t* text, size_t len, uint64_t addr, BranchTargets* t);

// One plan per `svc #0` in `text` (whose first byte is at `addr`): kPatch with
// [start, end) the svc's 4 bytes, or left (not of interest, original frame).
std::vector<SitePlan> PlanSites(const uint8_t* text, size_t len, uint64_t addr,
                                const BranchTargets& targets, const Interest& interest);

// The stub for plan `p` at `stub_addr`; `entry_slot` holds the entry's address (within
// 1 MiB: a literal load), `mark_tls` is the clone mark's offset from tpidr_el0 (below
// 16 MiB). Empty if something does not reach.
std::vector<uint8_t> BuildStub(const SitePlan& p, uint64_t stub_addr, uint64_t entry_slot,
                               int32_t mark_tls);
// The 4 bytes that replace the svc: `b stub`.
std::vector<uint8_t> BuildPatch(const SitePlan& p, uint64_t stub_addr);
// True if a `b` at `from` reaches `to` (+-128 MiB).
bool BranchReaches(uint64_t from, uint64_t to);

}  // namespace fanstore::intercept::a64
