// The aarch64 planner and stubs (intercept/a64.h), on hand-assembled code: they are pure,
// so they are tested on every architecture; the stubs run for real in the aarch64 suite.
#include "intercept/a64.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace fanstore::intercept::a64 {
namespace {

constexpr uint32_t kNop = 0xD503201F;
constexpr uint32_t kRet = 0xD65F03C0;
uint32_t MovW8(uint32_t imm) {  // mov w8, #imm
  return 0x52800008 | (imm << 5);
}
uint32_t MovX8(uint32_t imm) {  // mov x8, #imm
  return 0xD2800008 | (imm << 5);
}
constexpr uint32_t kMovX0X19 = 0xAA1303E0;  // mov x0, x19
constexpr uint32_t kLdrX8 = 0xF9400268;     // ldr x8, [x19]
constexpr uint32_t kUxtwX8W0 = 0x2A0003E8;  // mov w8, w0 (the syscall() function's)

constexpr uint64_t kBase = 0x400000;

std::vector<uint8_t> Code(std::initializer_list<uint32_t> words) {
  std::vector<uint8_t> b(words.size() * 4);
  std::memcpy(b.data(), std::data(words), b.size());
  return b;
}

uint32_t WordAt(const std::vector<uint8_t>& b, size_t i) {
  uint32_t w;
  std::memcpy(&w, b.data() + i * 4, 4);
  return w;
}

std::vector<SitePlan> Plan(const std::vector<uint8_t>& code, const Interest& interest,
                           std::vector<uint64_t> entries = {}) {
  BranchTargets t(kBase, code.size());
  for (uint64_t e : entries) t.Add(e);
  AddTargets(code.data(), code.size(), kBase, &t);
  return PlanSites(code.data(), code.size(), kBase, t, interest);
}

Interest Wanting(std::initializer_list<int> nrs) {
  Interest in;
  for (int nr : nrs) in.nrs.set(static_cast<size_t>(nr));
  return in;
}

TEST(A64Planner, FindsTheNumberAndPatchesTheSvcAlone) {
  const auto code = Code({MovX8(63), kMovX0X19, kSvc0, kRet, MovW8(172), kSvc0, kRet});
  const auto plans = Plan(code, Wanting({63}));
  ASSERT_EQ(plans.size(), 2u);
  EXPECT_EQ(plans[0].nr, 63);
  EXPECT_EQ(plans[0].decision, Decision::kPatch);
  EXPECT_EQ(plans[0].start, kBase + 8);
  EXPECT_EQ(plans[0].end, kBase + 12);
  EXPECT_EQ(plans[1].nr, 172);
  EXPECT_EQ(plans[1].decision, Decision::kUninteresting);
}

TEST(A64Planner, AWriteOfX8OrABranchTargetInBetweenLeavesTheNumberUnknown) {
  // ldr x8,[x19] after the mov: the number is whatever memory holds.
  auto plans = Plan(Code({MovX8(63), kLdrX8, kSvc0}), Wanting({}));
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(plans[0].nr, -1);
  EXPECT_EQ(plans[0].decision, Decision::kPatch);  // with the run-time check
  // the syscall() function: the number comes from a register
  plans = Plan(Code({kUxtwX8W0, kSvc0}), Wanting({}));
  EXPECT_EQ(plans[0].nr, -1);
  // flow may enter at the svc from elsewhere (a function entry there)
  plans = Plan(Code({MovX8(63), kNop, kSvc0}), Wanting({}), {kBase + 8});
  EXPECT_EQ(plans[0].nr, -1);
  // ...or through a branch: b.eq to the nop (word 2) from word 4
  const uint32_t b_eq_back = 0x54000000 | ((static_cast<uint32_t>(-2) & 0x7FFFF) << 5);
  plans = Plan(Code({MovX8(63), kNop, kNop, kSvc0, b_eq_back}), Wanting({}));
  EXPECT_EQ(plans[0].nr, -1);
}

TEST(A64Planner, CloneIsPatchedInPlaceAndSigreturnLeft) {
  const auto plans =
      Plan(Code({MovX8(220), kSvc0, MovX8(435), kSvc0, MovX8(139), kSvc0}), Wanting({}));
  ASSERT_EQ(plans.size(), 3u);
  EXPECT_EQ(plans[0].decision, Decision::kPatch);
  EXPECT_EQ(plans[1].decision, Decision::kPatch);
  EXPECT_EQ(plans[2].decision, Decision::kOriginalFrame);
}

SitePlan Site(int nr) {
  SitePlan p;
  p.nr = nr;
  p.syscall_addr = p.start = kBase;
  p.end = kBase + 4;
  p.decision = Decision::kPatch;
  return p;
}

TEST(A64Stub, AKnownNumberCallsTheEntryAndBranchesBack) {
  const uint64_t stub = kBase + 0x10000, slot = stub - 16;
  const auto s = BuildStub(Site(63), stub, slot, 0x10);
  ASSERT_EQ(s.size(), 5u * 4);
  EXPECT_EQ(WordAt(s, 0), 0xA9BF7BF0u);  // stp x16, x30, [sp, #-16]!
  EXPECT_EQ(WordAt(s, 1), 0x58FFFF70u);  // ldr x16, slot (-20 bytes)
  EXPECT_EQ(WordAt(s, 2), 0xD63F0200u);  // blr x16
  EXPECT_EQ(WordAt(s, 3), 0xA8C17BF0u);  // ldp x16, x30, [sp], #16
  EXPECT_EQ(WordAt(s, 4),
            0x14000000u | ((static_cast<uint32_t>(-(0x10000 + 16 - 4) / 4)) & 0x3FFFFFF));
  const auto patch = BuildPatch(Site(63), stub);
  EXPECT_EQ(WordAt(patch, 0), 0x14000000u | (0x10000 / 4));  // b stub
}

TEST(A64Stub, CloneRunsTheCallInPlaceAndWritesTheMark) {
  const auto s = BuildStub(Site(220), kBase + 0x10000, kBase + 0x10000 - 16, 0x1234);
  ASSERT_FALSE(s.empty());
  size_t svc = 0, svcs = 0;
  for (size_t i = 0; i < s.size() / 4; ++i)
    if (WordAt(s, i) == kSvc0) svc = i, ++svcs;
  EXPECT_EQ(svcs, 1u);
  EXPECT_EQ(WordAt(s, 0), 0xA9BF47F0u);        // stp x16, x17, [sp, #-16]!
  EXPECT_EQ(WordAt(s, 1), 0xD53BD050u);        // mrs x16, tpidr_el0
  EXPECT_EQ(WordAt(s, 2), 0x91400610u);        // add x16, x16, #1, lsl #12
  EXPECT_EQ(WordAt(s, 4), 0x3908D211u);        // strb w17, [x16, #0x234]
  EXPECT_EQ(WordAt(s, svc + 1), 0xF81F0FE8u);  // str x8, [sp, #-16]!
  EXPECT_EQ(WordAt(s, svc + 4), 0xB4000040u);  // cbz x0, over the clear
  EXPECT_EQ(WordAt(s, svc + 5), 0x3908D11Fu);  // strb wzr, [x8, #0x234]
  EXPECT_EQ(WordAt(s, svc + 6), 0xF84107E8u);  // ldr x8, [sp], #16
}

TEST(A64Stub, AnUnknownNumberChecksForTheCloneFamilyFirst) {
  const auto s = BuildStub(Site(-1), kBase + 0x10000, kBase + 0x10000 - 16, 0x10);
  ASSERT_FALSE(s.empty());
  EXPECT_EQ(WordAt(s, 1), 0xD53B4211u);  // mrs x17, nzcv
  EXPECT_EQ(WordAt(s, 2), 0xF103711Fu);  // cmp x8, #220
  EXPECT_EQ(WordAt(s, 4), 0xF106CD1Fu);  // cmp x8, #435
  EXPECT_EQ(WordAt(s, 6), 0xF1022D1Fu);  // cmp x8, #139
}

TEST(A64Stub, OutOfReachIsRefused) {
  EXPECT_TRUE(BuildStub(Site(63), kBase + (200u << 20), kBase + (200u << 20) - 16, 0).empty());
  EXPECT_TRUE(BuildStub(Site(63), kBase + 0x10000, kBase + 0x10000 - (2u << 20), 0).empty());
  EXPECT_TRUE(BuildStub(Site(220), kBase + 0x10000, kBase, 1 << 24).empty());
  EXPECT_TRUE(BranchReaches(kBase, kBase + (128u << 20) - 4));
  EXPECT_FALSE(BranchReaches(kBase, kBase + (128u << 20)));
}

}  // namespace
}  // namespace fanstore::intercept::a64
