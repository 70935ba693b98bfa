// Stub code for one patched site (pure byte generation, see BuildStub), and the patch that
// replaces the site's range. Layout of a stub at address S:
//   <pre>                          the range's instructions before the syscall, copied
//                                  (RIP-relative ones with the displacement recomputed)
//   [cmp $N,%eax; je .Ldirect]x4   only if the number is unknown: clone, clone3, vfork and
//                                  rt_sigreturn run the original syscall here instead
//   lea -128(%rsp),%rsp            step over the red zone
//   call *entry_slot(%rip)         the common entry (saves state, calls the dispatcher);
//                                  rcx = 1: the kernel's call, made here; 0: rax is the result
//   lea 128(%rsp),%rsp
//   jrcxz .Lpost; syscall
//   [jmp .Lpost; .Ldirect: movb $1,%fs:M; syscall; <mark>]
//   .Lpost: <post>                 the range's instructions after the syscall, copied (a
//                                  jmp/jcc among them re-encoded as rel32, same target)
//   jmp end                        back to the first byte after the range
// A clone, clone3 or vfork site (number known) gets only
// <pre> movb $1,%fs:M; syscall; <mark> <post> jmp (the mark is set before the call too, so
// a child is marked from its first instruction, signal handlers included):
// the child may return on another stack (or on the parent's, which it must not disturb).
// <mark> writes the clone mark (clone_mark.h) with no stack and no flags (the code after
// a syscall may still test the flags it set before; rcx and r11 are the kernel's anyway):
//   mov %rax,%rcx; jrcxz 1f; movb $0,%fs:M; jmp 2f; 1: movb $1,%fs:M; 2:
// A thread stopped inside a range while it is patched (thread_park.h) resumes at the same
// instruction in the stub: StubMap records where each instruction boundary of the range
// lies in its stub (the syscall itself maps to the stub's call, the point after it to .Lpost
// or to the clone mark).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "intercept/planner.h"

namespace fanstore::intercept {

// Points (offset in the range, offset in the stub), ascending by range offset; bytes between
// two points are copied unchanged, so an offset maps by the last point at or before it.
struct StubMap {
  std::vector<std::pair<uint32_t, uint32_t>> points;
};

// The stub address of the instruction boundary `pc` in [plan.start, plan.end).
uint64_t StubPcFor(const StubMap& map, const SitePlan& plan, uint64_t stub_addr, uint64_t pc);

// `range` holds the original bytes of [plan.start, plan.end); `stub_addr` is where the stub
// will live; `entry_slot` the address of an 8-byte slot holding the entry's address.
// Returns an empty vector if a rel32 would not reach.
// `mark_tls` is the clone mark's offset from %fs. `map`, if given, receives the stub's map.
std::vector<uint8_t> BuildStub(const SitePlan& plan, const uint8_t* range, uint64_t stub_addr,
                               uint64_t entry_slot, int32_t mark_tls, StubMap* map = nullptr);

// The bytes that replace [plan.start, plan.end): jmp rel32 to the stub, then int3 padding.
std::vector<uint8_t> BuildPatch(const SitePlan& plan, uint64_t stub_addr);

// True if a rel32 jump from `from` (address after the instruction) reaches `to`.
bool Rel32Reaches(uint64_t from, uint64_t to);

}  // namespace fanstore::intercept
