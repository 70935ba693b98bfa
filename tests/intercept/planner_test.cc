// Golden tests of the patch planner and stub generator: machine code in, plan and bytes out.
#include "intercept/planner.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "base/syscall_numbers.h"
#include "intercept/insn.h"
#include "intercept/libc_image.h"
#include "intercept/plan_cache.h"
#include "intercept/stub.h"

namespace fanstore::intercept {
namespace {

using Bytes = std::vector<uint8_t>;
constexpr uint64_t kBase = 0x10000;

Bytes Cat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}
Bytes MovEax(int32_t nr) {
  Bytes b = {0xB8};
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(nr >> (8 * i)));
  return b;
}
const Bytes kSyscall = {0x0F, 0x05};
const Bytes kCmpRax4095 = {0x48, 0x3D, 0x01, 0xF0, 0xFF, 0xFF};  // cmp $-4095,%rax
const Bytes kRet = {0xC3};
const Bytes kMovEdiToEax = {0x89, 0xF8};                              // mov %edi,%eax
const Bytes kMovRcxToR10 = {0x49, 0x89, 0xCA};                        // mov %rcx,%r10
const Bytes kXorSil80 = {0x40, 0x80, 0xF6, 0x80};                     // xor $0x80,%sil
const Bytes kLeaRipRdx = {0x48, 0x8D, 0x15, 0x10, 0x00, 0x00, 0x00};  // lea 0x10(%rip),%rdx
Bytes JmpRel8(int8_t d) {
  return {0xEB, static_cast<uint8_t>(d)};
}

Interest Only(std::initializer_list<long> nrs) {
  Interest i;
  for (long n : nrs) i.nrs.set(n);
  return i;
}
Interest All() {
  Interest i;
  i.all = true;
  return i;
}

std::vector<SitePlan> Plan(const Bytes& code, const Interest& interest) {
  std::vector<Insn> insns;
  EXPECT_TRUE(DecodeRegion(code.data(), code.size(), kBase, &insns));
  return PlanSites(insns, CollectTargets(insns, kBase, code.size(), {}), interest);
}

SitePlan Patch(uint64_t sc, uint64_t start, uint64_t end, int nr) {
  SitePlan p;
  p.syscall_addr = kBase + sc;
  p.start = kBase + start;
  p.end = kBase + end;
  p.nr = nr;
  p.decision = Decision::kPatch;
  return p;
}

TEST(Planner, MovEaxSyscallIsThePreferredSevenBytes) {
  const auto plans = Plan(Cat({MovEax(SYS_getpid), kSyscall, kRet}), Only({SYS_getpid}));
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(plans[0], Patch(5, 0, 7, SYS_getpid));
}

TEST(Planner, KnownUninterestingNumberIsLeftAlone) {
  const auto plans = Plan(Cat({MovEax(SYS_getpid), kSyscall, kRet}), Only({SYS_openat}));
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(plans[0].decision, Decision::kUninteresting);
}

TEST(Planner, SigreturnIsNeverPatched) {
  const auto plans = Plan(Cat({MovEax(SYS_rt_sigreturn), kSyscall, kRet}), All());
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(plans[0].decision, Decision::kOriginalFrame);
}

TEST(Planner, CloneFamilyIsAlwaysPatchedForTheCloneMark) {
  for (long nr : {SYS_clone, SYS_clone3, SYS_vfork}) {
    const auto plans =
        Plan(Cat({MovEax(static_cast<int32_t>(nr)), kSyscall, kRet}), Only({SYS_openat}));
    ASSERT_EQ(plans.size(), 1u);
    EXPECT_EQ(plans[0], Patch(5, 0, 7, static_cast<int>(nr))) << nr;
  }
}

TEST(Planner, UnknownNumberTakesTheInstructionBefore) {
  // mov %edi,%eax; mov %rcx,%r10; syscall; cmp $-4095,%rax  (the syscall(2) shape)
  const auto plans = Plan(Cat({kMovEdiToEax, kMovRcxToR10, kSyscall, kCmpRax4095}), All());
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(plans[0], Patch(5, 2, 7, -1));
}

TEST(Planner, NumberIsFoundPastInstructionsThatLeaveRaxAlone) {
  // mov $202,%eax; xor $0x80,%sil; syscall   (the futex shape)
  const auto plans = Plan(Cat({MovEax(SYS_futex), kXorSil80, kSyscall, kRet}), Only({SYS_futex}));
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(plans[0], Patch(9, 5, 11, SYS_futex));
  EXPECT_EQ(Plan(Cat({MovEax(SYS_futex), kXorSil80, kSyscall, kRet}), Only({SYS_read}))[0].decision,
            Decision::kUninteresting);
}

TEST(Planner, SyscallThatIsABranchTargetExtendsForward) {
  // jmp L; mov $39,%eax; L: syscall; cmp $-4095,%rax; ret
  const auto plans =
      Plan(Cat({JmpRel8(5), MovEax(SYS_getpid), kSyscall, kCmpRax4095, kRet}), All());
  ASSERT_EQ(plans.size(), 1u);
  // eax may come from the jump's path: the number is unknown, and the range starts at the
  // syscall (a branch target may start a range, never sit inside one).
  EXPECT_EQ(plans[0], Patch(7, 7, 15, -1));
}

TEST(Planner, BranchTargetRightAfterTheSyscallStaysOutsideTheRange) {
  // mov $39,%eax; syscall; L: cmp ...; jmp L   -> the 7-byte shape, L untouched
  const auto plans = Plan(Cat({MovEax(SYS_getpid), kSyscall, kCmpRax4095, JmpRel8(-8)}), All());
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(plans[0], Patch(5, 0, 7, SYS_getpid));
}

TEST(Planner, RefusesWhenNeitherSideCanMove) {
  // ret; mov %edi,%eax; syscall; L: cmp ...; jmp L
  const auto plans = Plan(Cat({kRet, kMovEdiToEax, kSyscall, kCmpRax4095, JmpRel8(-8)}), All());
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(plans[0].decision, Decision::kRefused);
  EXPECT_FALSE(plans[0].reason.empty());
}

SitePlan WithFixup(SitePlan p, uint8_t at, uint8_t len, FixKind kind, uint8_t disp_at = 0) {
  Fixup& f = p.fixups[p.fixups_n++];
  f.at = at;
  f.len = len;
  f.kind = kind;
  f.disp_at = disp_at;
  return p;
}

TEST(Planner, RipRelativeNeighbourIsCopiedWithItsDisplacementRecomputed) {
  // ret; lea 0x10(%rip),%rdx; syscall; ret
  const auto plans = Plan(Cat({kRet, kLeaRipRdx, kSyscall, kRet}), All());
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(plans[0], WithFixup(Patch(8, 1, 10, -1), 0, 7, FixKind::kRipDisp, 3));
}

TEST(Planner, NumberIsFoundPastRipRelativeInstructions) {
  // mov $202,%eax; lea 0x10(%rip),%rdx; syscall; jmp   (glibc 2.31's inline futex wake)
  const Bytes code = Cat({MovEax(SYS_futex), kLeaRipRdx, kSyscall, JmpRel8(-2)});
  EXPECT_EQ(Plan(code, Only({SYS_read}))[0].decision, Decision::kUninteresting);
  const auto plans = Plan(code, Only({SYS_futex}));
  EXPECT_EQ(plans[0], WithFixup(Patch(12, 5, 14, SYS_futex), 0, 7, FixKind::kRipDisp, 3));
}

TEST(Planner, BranchesAfterTheSyscallMoveIntoTheStub) {
  // ret; syscall; jne +0x10; cmp $-4095,%rax   -> [syscall, jne, cmp]
  const auto a = Plan(Cat({kRet, kSyscall, {0x75, 0x10}, kCmpRax4095, kRet}), All());
  EXPECT_EQ(a[0], WithFixup(Patch(1, 1, 11, -1), 2, 2, FixKind::kBranch));
  // ret; syscall; jmp rel32   -> [syscall, jmp]
  const auto b = Plan(Cat({kRet, kSyscall, {0xE9, 0x00, 0x01, 0x00, 0x00}, kRet}), All());
  EXPECT_EQ(b[0], WithFixup(Patch(1, 1, 8, -1), 2, 5, FixKind::kBranch));
  // ret; syscall; jmp rel8; ...: 4 bytes, and what follows the jmp is not this path's
  const auto c = Plan(Cat({kRet, kSyscall, JmpRel8(6), kCmpRax4095, kRet}), All());
  EXPECT_EQ(c[0].decision, Decision::kRefused);
  // a call is never moved: its return address would be in the stub
  const auto d = Plan(Cat({kRet, kSyscall, {0xE8, 0x00, 0x01, 0x00, 0x00}, kRet}), All());
  EXPECT_EQ(d[0].decision, Decision::kRefused);
}

TEST(Planner, OverlappingRangesAreRefusedNotShared) {
  // syscall; mov $39,%eax; syscall   (the first site's forward range swallows the mov)
  const auto plans = Plan(Cat({kSyscall, MovEax(SYS_getpid), kSyscall, kRet}), All());
  ASSERT_EQ(plans.size(), 2u);
  EXPECT_EQ(plans[0], Patch(0, 0, 7, -1));
  EXPECT_EQ(plans[1].decision, Decision::kRefused);
}

TEST(Stub, KnownNumberStubIsExact) {
  const Bytes code = Cat({MovEax(SYS_getpid), kSyscall, kRet});
  const SitePlan p = Patch(5, 0, 7, SYS_getpid);
  const uint64_t stub = 0x20000, slot = 0x1FFF0;
  const Bytes s = BuildStub(p, code.data(), stub, slot, -8);
  const Bytes want = Cat({
      MovEax(SYS_getpid),                       // pre: the mov
      {0x48, 0x8D, 0x64, 0x24, 0x80},           // lea -0x80(%rsp),%rsp
      {0xFF, 0x15, 0xE0, 0xFF, 0xFF, 0xFF},     // call *slot(%rip): 0x1FFF0 - 0x20010
      {0x48, 0x8D, 0xA4, 0x24, 0x80, 0, 0, 0},  // lea 0x80(%rsp),%rsp
      {0xE3, 0x02, 0x0F, 0x05},                 // jrcxz over; syscall (the entry's rcx = 1)
      {0xE9, 0xE6, 0xFF, 0xFE, 0xFF},           // jmp 0x10007: 0x10007 - 0x20021
  });
  EXPECT_EQ(s, want);
  EXPECT_EQ(BuildPatch(p, stub), (Bytes{0xE9, 0xFB, 0xFF, 0x00, 0x00, 0xCC, 0xCC}));
}

// The mark for a thread-pointer offset of -8: movb $V,%fs:-8.
Bytes MarkStore(uint8_t v) {
  return {0x64, 0xC6, 0x04, 0x25, 0xF8, 0xFF, 0xFF, 0xFF, v};
}
const Bytes kMark = Cat({{0x48, 0x89, 0xC1, 0xE3, 0x0B},  // mov %rax,%rcx; jrcxz child
                         MarkStore(0),
                         {0xEB, 0x09},    // parent: 0; jmp done
                         MarkStore(1)});  // child: 1

TEST(Stub, CloneStubRunsTheCallItselfThenWritesTheMark) {
  // vfork as glibc has it: pop %rdi; mov $58,%eax; syscall; push %rdi
  const Bytes code = Cat({{0x5F}, MovEax(SYS_vfork), kSyscall, {0x57}});
  const SitePlan p = Patch(6, 1, 8, SYS_vfork);
  const Bytes s = BuildStub(p, code.data() + 1, 0x20000, 0x1FFF0, -8);
  const Bytes want = Cat({
      MovEax(SYS_vfork),
      MarkStore(1),
      kSyscall,  // no stack touched, no hook
      kMark,
      {0xE9, 0xDA, 0xFF, 0xFE, 0xFF},  // jmp 0x10008: 0x10008 - 0x2002E
  });
  EXPECT_EQ(s, want);
}

TEST(Stub, UnknownNumberStubChecksForOriginalFrameCalls) {
  const Bytes code = Cat({kMovEdiToEax, kMovRcxToR10, kSyscall, kCmpRax4095});
  const SitePlan p = Patch(5, 2, 7, -1);
  const Bytes s = BuildStub(p, code.data() + 2, 0x20000, 0x1FFF0, -8);
  ASSERT_FALSE(s.empty());
  EXPECT_EQ(Bytes(s.begin(), s.begin() + 3), kMovRcxToR10);
  EXPECT_EQ(s[3], 0x3D);  // cmp $clone,%eax
  EXPECT_EQ(s[4], SYS_clone);
  int cmps = 0;
  for (size_t i = 3; i + 11 <= s.size() && s[i] == 0x3D; i += 11) ++cmps;
  EXPECT_EQ(cmps, 4);
  // The direct path is a real syscall instruction inside the stub, followed by the mark,
  // and the hook path jumps over both to the way back (the range ends at the syscall).
  size_t direct = 0;
  for (size_t i = 0; i + 1 < s.size(); ++i)
    if (s[i] == 0x0F && s[i + 1] == 0x05) direct = i;
  ASSERT_GT(direct, 0u);
  EXPECT_EQ(Bytes(s.begin() + static_cast<long>(direct) + 2,
                  s.begin() + static_cast<long>(direct + 2 + kMark.size())),
            kMark);
  const Bytes set = MarkStore(1);  // the mark is set before the direct call
  ASSERT_GT(direct, set.size() + 2);
  EXPECT_EQ(Bytes(s.begin() + static_cast<long>(direct - set.size()),
                  s.begin() + static_cast<long>(direct)),
            set);
  EXPECT_EQ(s[direct - set.size() - 2], 0xEB);
  EXPECT_EQ(s[direct - set.size() - 1], set.size() + 2 + kMark.size());
  ASSERT_EQ(s.size(), direct + 2 + kMark.size() + 5);
  EXPECT_EQ(s[direct + 2 + kMark.size()], 0xE9);
}

TEST(Stub, OutOfReachIsReportedNotWrapped) {
  const Bytes code = Cat({MovEax(SYS_getpid), kSyscall});
  EXPECT_TRUE(
      BuildStub(Patch(5, 0, 7, 39), code.data(), 0x20000, 0x20000 + (5ull << 32), -8).empty());
  EXPECT_FALSE(Rel32Reaches(0, 1ull << 32));
  EXPECT_TRUE(Rel32Reaches(1ull << 32, (1ull << 32) - 5));
}

TEST(Stub, RipRelativeAndBranchFixupsKeepTheirTargets) {
  // ret; lea 0x10(%rip),%rdx; syscall; ret at 0x10000: the lea's target is 0x10018.
  const Bytes code = Cat({kRet, kLeaRipRdx, kSyscall, kRet});
  const SitePlan p = WithFixup(Patch(8, 1, 10, -1), 0, 7, FixKind::kRipDisp, 3);
  const Bytes s = BuildStub(p, code.data() + 1, 0x20000, 0x1FFF0, -8);
  ASSERT_GE(s.size(), 7u);
  // at 0x20000, the next instruction is at 0x20007: 0x10018 - 0x20007 = -0xFFEF
  EXPECT_EQ(Bytes(s.begin(), s.begin() + 7), (Bytes{0x48, 0x8D, 0x15, 0x11, 0x00, 0xFF, 0xFF}));
  // ret; syscall; jne +0x10 at 0x10003 (target 0x10015); cmp: the jne becomes 0F 85 rel32
  const Bytes code2 = Cat({kRet, kSyscall, {0x75, 0x10}, kCmpRax4095, kRet});
  const SitePlan q = WithFixup(Patch(1, 1, 11, -1), 2, 2, FixKind::kBranch);
  const Bytes t = BuildStub(q, code2.data() + 1, 0x20000, 0x1FFF0, -8);
  // the tail: 0F 85 rel32, the cmp, jmp back to 0x1000B
  ASSERT_GE(t.size(), 17u);
  const size_t at = t.size() - 17;
  EXPECT_EQ(t[at], 0x0F);
  EXPECT_EQ(t[at + 1], 0x85);
  int32_t rel;
  std::memcpy(&rel, &t[at + 2], 4);
  EXPECT_EQ(0x20000 + at + 6 + static_cast<int64_t>(rel), 0x10015);
  EXPECT_EQ(Bytes(t.begin() + static_cast<long>(at) + 6, t.begin() + static_cast<long>(at) + 12),
            kCmpRax4095);
  // a target beyond rel32 reach of the stub is refused, not wrapped
  EXPECT_TRUE(BuildStub(p, code.data() + 1, 0x10000 + (3ull << 31), 0x10000 + (3ull << 31) - 16, -8)
                  .empty());
}

// A thread stopped inside a range while it is patched resumes at the same instruction in
// the stub: the syscall at the stub's call (or, for clone, its mark), the point after it at
// .Lpost, and an instruction after a re-encoded branch where the longer branch ends.
TEST(Stub, EveryInstructionOfTheRangeHasItsPlaceInTheStub) {
  StubMap map;
  const Bytes code = Cat({MovEax(SYS_getpid), kSyscall, kRet});
  const SitePlan p = Patch(5, 0, 7, SYS_getpid);
  ASSERT_FALSE(BuildStub(p, code.data(), 0x20000, 0x1FFF0, -8, &map).empty());
  EXPECT_EQ(StubPcFor(map, p, 0x20000, 0x10000), 0x20000u);  // the mov
  EXPECT_EQ(StubPcFor(map, p, 0x20000, 0x10005), 0x20005u);  // the syscall: lea; call

  const Bytes code2 = Cat({kRet, kSyscall, {0x75, 0x10}, kCmpRax4095, kRet});
  const SitePlan q = WithFixup(Patch(1, 1, 11, -1), 2, 2, FixKind::kBranch);
  const Bytes t = BuildStub(q, code2.data() + 1, 0x20000, 0x1FFF0, -8, &map);
  ASSERT_GE(t.size(), 17u);
  const uint64_t post = 0x20000 + t.size() - 17;             // the jne, now 0F 85 rel32
  EXPECT_EQ(StubPcFor(map, q, 0x20000, 0x10001), 0x20000u);  // syscall: the number checks
  EXPECT_EQ(StubPcFor(map, q, 0x20000, 0x10003), post);      // after it: .Lpost
  EXPECT_EQ(StubPcFor(map, q, 0x20000, 0x10005), post + 6);  // the cmp after the longer jne

  const Bytes code3 = Cat({{0x5F}, MovEax(SYS_vfork), kSyscall, {0x57}});
  const SitePlan v = Patch(6, 1, 8, SYS_vfork);
  ASSERT_FALSE(BuildStub(v, code3.data() + 1, 0x20000, 0x1FFF0, -8, &map).empty());
  EXPECT_EQ(StubPcFor(map, v, 0x20000, 0x10006), 0x20005u);  // the mark store, then syscall
}

// A plan with fixups survives the cache as it was made; a stored fixup that would split
// the copied bytes at the syscall is refused (the plan is made again, never misused).
TEST(PlanCache, FixupsRoundTripAndBadOnesAreRefused) {
  // ret; lea 0x10(%rip),%rdx; syscall; jne +0x10; cmp $-4095,%rax; ret: two sites' worth
  const Bytes code =
      Cat({kRet, kLeaRipRdx, kSyscall, kRet, kSyscall, {0x75, 0x10}, kCmpRax4095, kRet});
  LibcImage img;
  img.text_start = reinterpret_cast<uint64_t>(code.data());
  img.text_end = img.text_start + code.size();
  std::vector<Insn> insns;
  ASSERT_TRUE(DecodeRegion(code.data(), code.size(), img.text_start, &insns));
  const auto plans =
      PlanSites(insns, CollectTargets(insns, img.text_start, code.size(), {}), All());
  ASSERT_EQ(plans.size(), 2u);
  ASSERT_EQ(plans[0].fixups_n, 1);
  ASSERT_EQ(plans[1].fixups_n, 1);
  char dir[] = "/tmp/fanstore-plan-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/plan";
  StorePlan(path, img, plans);
  std::vector<SitePlan> loaded;
  ASSERT_TRUE(LoadPlan(path, img, &loaded));
  ASSERT_EQ(loaded.size(), 2u);
  EXPECT_EQ(loaded[0], plans[0]);
  EXPECT_EQ(loaded[1], plans[1]);
  // A fixup that is well formed but covers the syscall's first byte (offset 7 of the first
  // range): only the syscall check stands in its way.
  std::vector<SitePlan> bad = plans;
  bad[0].fixups[0] = Fixup{6, 2, 0, FixKind::kBranch};
  StorePlan(path, img, bad);
  EXPECT_FALSE(LoadPlan(path, img, &loaded));
  ::unlink(path.c_str());
  ::rmdir(dir);
}

// The real libc of this machine: every site gets a decision, refusals are rare, and no
// patched range has a branch target inside it or a non-relocatable copied instruction.
TEST(PlannerOnThisLibc, EverySiteIsPlannedSafely) {
  auto img = LibcImage::Locate();
  ASSERT_TRUE(img.ok()) << img.status().message();
  img->ReadFunctionEntries();
  EXPECT_GT(img->function_entries.size(), 1000u);
  EXPECT_EQ(img->build_id.size(), 40u) << "a 20-byte GNU build-id";
  const uint64_t len = img->text_end - img->text_start;
  std::vector<Insn> insns;
  ASSERT_TRUE(DecodeRegion(reinterpret_cast<const uint8_t*>(img->text_start), len, img->text_start,
                           &insns));
  const auto targets = CollectTargets(insns, img->text_start, len, img->function_entries);
  const auto plans = PlanSites(insns, targets, All());
  size_t sites = 0, patched = 0, refused = 0, frame = 0;
  for (const Insn& x : insns) sites += x.is_syscall;
  ASSERT_EQ(plans.size(), sites);
  ASSERT_GT(sites, 100u);
  for (const SitePlan& p : plans) {
    if (p.decision == Decision::kRefused) ++refused;
    if (p.decision == Decision::kOriginalFrame) ++frame;
    if (p.decision != Decision::kPatch) continue;
    ++patched;
    EXPECT_GE(p.end - p.start, 5u);
    EXPECT_TRUE(p.start <= p.syscall_addr && p.syscall_addr + 2 <= p.end);
    for (const Insn& x : insns) {
      if (x.addr <= p.start || x.addr >= p.end) continue;
      EXPECT_FALSE(targets.Has(x.addr)) << std::hex << x.addr;
      if (x.addr != p.syscall_addr) {
        EXPECT_TRUE(x.relocatable || (x.movable_branch && x.addr > p.syscall_addr))
            << std::hex << x.addr;
        const bool fixed = x.rip_disp_at > 0 || x.movable_branch;
        int listed = 0;
        for (uint8_t k = 0; k < p.fixups_n; ++k) listed += p.fixups[k].at == x.addr - p.start;
        EXPECT_EQ(listed, fixed ? 1 : 0) << std::hex << x.addr;
      }
    }
  }
  EXPECT_EQ(patched + refused + frame, sites);
  EXPECT_LE(refused * 20, sites) << "more than 5% of sites refused";
  std::printf("libc %s: %zu sites, %zu patchable, %zu original-frame, %zu refused\n",
              img->path.c_str(), sites, patched, frame, refused);
}

}  // namespace
}  // namespace fanstore::intercept
