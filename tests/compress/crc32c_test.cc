#include "compress/crc32c.h"

#include <gtest/gtest.h>

#include <string>

namespace fanstore::compress {
namespace {

TEST(Crc32c, MatchesTheStandardCheckValue) {
  EXPECT_EQ(Crc32c(0, "123456789", 9), 0xE3069283u);
}

TEST(Crc32c, EmptyInputIsZero) {
  EXPECT_EQ(Crc32c(0, "", 0), 0u);
}

TEST(Crc32c, ComposesAcrossCalls) {
  const std::string s = "the quick brown fox jumps over the lazy dog";
  const uint32_t whole = Crc32c(0, s.data(), s.size());
  for (size_t cut = 0; cut <= s.size(); ++cut) {
    const uint32_t part = Crc32c(Crc32c(0, s.data(), cut), s.data() + cut, s.size() - cut);
    EXPECT_EQ(part, whole) << "cut at " << cut;
  }
}

TEST(Crc32c, DetectsASingleBitFlip) {
  std::string s(4096, 'a');
  const uint32_t a = Crc32c(0, s.data(), s.size());
  s[1234] ^= 1;
  EXPECT_NE(Crc32c(0, s.data(), s.size()), a);
}

}  // namespace
}  // namespace fanstore::compress
