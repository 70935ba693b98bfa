// base/copy_alias.h: which copies alias (x86-64 only), and that the staging place keeps both
// copies clear of it for every destination offset.
#include "base/copy_alias.h"

#include <gtest/gtest.h>

#include <vector>

namespace fanstore::base {
namespace {

bool Aliases(uint64_t dst, uint64_t src) {  // the rule itself, apart from the size
  const uint64_t d = (dst - src) & (kAliasPage - 1);
  return d >= 1 && d < 32;
}

TEST(CopyAliasTest, DestinationsOneTo31BytesPastTheSourceAliasOnX86Only) {
  const auto* page = reinterpret_cast<const void*>(uintptr_t{1} << 20);  // (never dereferenced)
  const auto at = [&](uint64_t off) {
    return reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(page) + off);
  };
#if defined(__x86_64__)
  EXPECT_TRUE(CopyAliases(at(16), 0, 100000));         // malloc's 16 bytes past a page
  EXPECT_TRUE(CopyAliases(at(16), 8192 * 3, 100000));  // a member's offset on a page
  EXPECT_TRUE(CopyAliases(at(1), 0, kAliasMinBytes));
  EXPECT_TRUE(CopyAliases(at(4096 + 131), 100, 100000));  // any source offset: the distance
#else
  EXPECT_FALSE(CopyAliases(at(16), 0, 100000));
#endif
  EXPECT_FALSE(CopyAliases(at(0), 0, 100000));
  EXPECT_FALSE(CopyAliases(at(32), 0, 100000));
  EXPECT_FALSE(CopyAliases(at(4095), 4096, 100000));         // destination before the source
  EXPECT_FALSE(CopyAliases(at(16), 0, kAliasMinBytes - 1));  // too short to stage
}

TEST(CopyAliasTest, StagingIsInTheAreasFirstPageAndAliasesNeitherWay) {
  std::vector<uint8_t> area(3 * kAliasPage);
  for (uint64_t dst = 0; dst < 2 * kAliasPage; dst += 1) {
    const auto* d = reinterpret_cast<const void*>(uintptr_t{1 << 20} + dst);
    uint8_t* stage = StagingFor(area.data(), d);
    ASSERT_GE(stage, area.data());
    ASSERT_LT(stage, area.data() + kAliasPage);
    const auto s = reinterpret_cast<uintptr_t>(stage);
    EXPECT_FALSE(Aliases(reinterpret_cast<uintptr_t>(d), s)) << dst;  // out of the stage
    for (uint64_t src = dst - 31; src != dst; ++src)  // into it, from each aliasing source
      EXPECT_FALSE(Aliases(s, (uintptr_t{1} << 20) + src)) << dst << " " << src;
  }
}

}  // namespace
}  // namespace fanstore::base
