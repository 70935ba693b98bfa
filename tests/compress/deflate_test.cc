#include "compress/deflate.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <vector>

#include "compress/inflate.h"
#include "tests/testutil.h"

namespace fanstore::compress {
namespace {

std::vector<uint8_t> Bytes(const std::string& s) {
  return {s.begin(), s.end()};
}

class DeflateLevel : public ::testing::TestWithParam<int> {};

TEST_P(DeflateLevel, RoundTripsTextAndRandomData) {
  Deflater d(GetParam());
  for (const std::string& s : {testing::TextBytes(300000), testing::RandomBytes(70000, 1),
                               std::string(1, 'x'), std::string(1 << 20, '\0')}) {
    std::vector<uint8_t> in = Bytes(s), packed, out(in.size());
    ASSERT_EQ(d.Compress(in, packed), 0);
    ASSERT_EQ(InflateExact(packed, out), 0);
    EXPECT_EQ(out, in);
  }
}

TEST_P(DeflateLevel, TextCompresses) {
  Deflater d(GetParam());
  const auto in = Bytes(testing::TextBytes(200000));
  std::vector<uint8_t> packed;
  ASSERT_EQ(d.Compress(in, packed), 0);
  EXPECT_LT(packed.size(), in.size() / 3);
}

INSTANTIATE_TEST_SUITE_P(AllLevels, DeflateLevel, ::testing::Values(0, 1, 2, 3));

// The streaming decoder reads large one-stream members of formats 1 and 2.
TEST(Inflater, StreamingEqualsInput) {
  Deflater d(1);
  const auto in = Bytes(testing::TextBytes(5 << 20));
  std::vector<uint8_t> packed;
  ASSERT_EQ(d.Compress(in, packed), 0);
  // Inflate in small output steps.
  Inflater inf;
  std::vector<uint8_t> out;
  std::vector<uint8_t> buf(64 * 1024);
  size_t pos = 0;
  int rc = 0;
  while (rc == 0) {
    size_t c = 0, p = 0;
    rc = inf.Step({packed.data() + pos, packed.size() - pos}, buf, &c, &p);
    ASSERT_GE(rc, 0);
    pos += c;
    out.insert(out.end(), buf.begin(), buf.begin() + p);
  }
  EXPECT_EQ(out, in);
}

TEST(InflateExact, DamagedStreamIsAnError) {
  Deflater d(1);
  const auto in = Bytes(testing::TextBytes(100000));
  std::vector<uint8_t> packed, out(in.size());
  ASSERT_EQ(d.Compress(in, packed), 0);
  packed.resize(packed.size() / 2);  // truncated
  EXPECT_EQ(InflateExact(packed, out), -EBADMSG);
}

TEST(InflateExact, WrongOutputSizeIsAnError) {
  Deflater d(1);
  const auto in = Bytes(testing::TextBytes(100000));
  std::vector<uint8_t> packed;
  ASSERT_EQ(d.Compress(in, packed), 0);
  std::vector<uint8_t> small(in.size() - 1), large(in.size() + 1);
  EXPECT_EQ(InflateExact(packed, small), -EBADMSG);
  EXPECT_EQ(InflateExact(packed, large), -EBADMSG);
}

TEST(InflateExact, GarbageIsAnErrorNotACrash) {
  for (uint32_t seed = 0; seed < 200; ++seed) {
    const auto junk = Bytes(testing::RandomBytes(1 + seed * 7, seed));
    std::vector<uint8_t> out(4096);
    EXPECT_NE(InflateExact(junk, out), 0) << "seed " << seed;
  }
}

}  // namespace
}  // namespace fanstore::compress
