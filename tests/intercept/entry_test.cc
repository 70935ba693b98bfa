// The entry's contract for the calls a prefilter decides (intercept/entry_asm.S): what it
// gives the stub (rcx = 1: the kernel's call, rax the number again; rcx = 0: rax is the
// result), and the arithmetic flags as they came, whatever the prefilter's code did to
// them (code after a `syscall` may still test flags set before it, as the kernel keeps
// them).
#include <gtest/gtest.h>

#include "intercept/call_abi.h"

extern "C" void fanstore_intercept_entry();

namespace fanstore::intercept {
namespace {

constexpr long kPassedNr = 39;     // getpid: to the kernel
constexpr long kAnsweredNr = 102;  // getuid: answered with 4242 + its first argument

PrefilterResult TestPrefilter(long nr, const long a[6]) noexcept {
  // Leaves flags unlike the ones the test sets: ZF and PF set, CF, SF and OF clear.
  asm volatile("cmp %0, %0" : : "r"(nr) : "cc");
  if (nr == kAnsweredNr) return {4242 + a[0], kAnswered};
  return {0, kToKernel};
}

struct EntryOut {
  long rax;
  long rcx;
  unsigned long flags;
};

// Calls the entry as a stub does (128 bytes below the red zone), with rflags set to
// `flags_in` just before and read just after.
EntryOut CallEntry(long nr, long a1, unsigned long flags_in) {
  EntryOut o{};
  long rcx = 0;
  unsigned long flags_out = 0;
  asm volatile(
      "lea -128(%%rsp), %%rsp\n"
      "push %[in]\n"
      "popfq\n"
      "call fanstore_intercept_entry\n"
      "pushfq\n"
      "pop %[out]\n"
      "lea 128(%%rsp), %%rsp\n"
      : "+a"(nr), "=c"(rcx), [out] "=&r"(flags_out)
      : [in] "r"(flags_in), "D"(a1)
      : "r11", "memory", "cc");
  o.rax = nr;
  o.rcx = rcx;
  o.flags = flags_out;
  return o;
}

class Entry : public ::testing::Test {
 protected:
  void SetUp() override {
    g_entry.prefilter = &TestPrefilter;
    g_entry.interest_all = true;
  }
  void TearDown() override {
    g_entry.prefilter = nullptr;
    g_entry.interest_all = false;
  }
};

constexpr unsigned long kCF = 1ul << 0, kPF = 1ul << 2, kAF = 1ul << 4, kZF = 1ul << 6,
                        kSF = 1ul << 7, kOF = 1ul << 11;
constexpr unsigned long kArith = kCF | kPF | kAF | kZF | kSF | kOF;
constexpr unsigned long kPatterns[] = {0, kArith, kCF, kPF, kAF, kZF, kSF, kOF, kCF | kSF | kOF};

TEST_F(Entry, PassedCallGoesBackToTheStubWithItsFlags) {
  for (unsigned long f : kPatterns) {
    const EntryOut o = CallEntry(kPassedNr, 0, f | 2);  // (bit 1 is always set)
    EXPECT_EQ(o.rcx, 1) << std::hex << f;
    EXPECT_EQ(o.rax, kPassedNr) << std::hex << f;
    EXPECT_EQ(o.flags & kArith, f) << "flags in " << std::hex << f;
  }
}

TEST_F(Entry, AnsweredCallReturnsTheValueWithItsFlags) {
  for (unsigned long f : kPatterns) {
    const EntryOut o = CallEntry(kAnsweredNr, 7, f | 2);
    EXPECT_EQ(o.rcx, 0) << std::hex << f;
    EXPECT_EQ(o.rax, 4249) << std::hex << f;
    EXPECT_EQ(o.flags & kArith, f) << "flags in " << std::hex << f;
  }
}

}  // namespace
}  // namespace fanstore::intercept
