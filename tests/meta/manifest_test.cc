#include "meta/manifest.h"

#include <gtest/gtest.h>

namespace fanstore::meta {
namespace {

Manifest Sample() {
  Manifest m;
  m.dataset_id = 0xfeedfacecafebeefull;
  m.source = "/data/my set/with%odd\nname\xff";
  m.compress = "auto";
  m.files = 10;
  m.dirs = 3;
  m.symlinks = 1;
  m.bytes = 1000;
  m.stored = 900;
  m.partitions.push_back({.id = 0,
                          .flags = 0,
                          .members = 9,
                          .bytes = 600,
                          .stored = 500,
                          .file_size = 12345,
                          .index_crc = 0x1234});
  m.partitions.push_back({.id = 1,
                          .flags = kFlagBroadcast,
                          .members = 6,
                          .bytes = 400,
                          .stored = 400,
                          .file_size = 777,
                          .index_crc = 0xffffffff});
  return m;
}

TEST(Manifest, RoundTrips) {
  const Manifest m = Sample();
  auto d = Manifest::Decode(m.Encode());
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->dataset_id, m.dataset_id);
  EXPECT_EQ(d->source, m.source);
  EXPECT_EQ(d->files, 10u);
  ASSERT_EQ(d->partitions.size(), 2u);
  EXPECT_EQ(d->partitions[1].flags, kFlagBroadcast);
  EXPECT_EQ(d->partitions[1].index_crc, 0xffffffffu);
  EXPECT_EQ(d->partitions[0].file_size, 12345u);
}

// Totals that the partitions do not hold: a forged file count would size a node cache for
// billions of members before any partition is read.
TEST(Manifest, TotalsMustFollowFromThePartitions) {
  Manifest m = Sample();
  m.files = 4000000000;
  auto d = Manifest::Decode(m.Encode());
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("do not fit the partitions' 15 members"), std::string::npos)
      << d.status().message();
  m = Sample();
  m.bytes += 1;
  EXPECT_FALSE(Manifest::Decode(m.Encode()).ok());
  m = Sample();
  m.partitions[1].members = UINT64_MAX;  // the sum wraps
  EXPECT_FALSE(Manifest::Decode(m.Encode()).ok());
  m = Sample();
  m.files = m.dirs = m.symlinks = 0;
  EXPECT_FALSE(Manifest::Decode(m.Encode()).ok());
}

TEST(Manifest, IsOneRecordPerLineText) {
  const std::string text = Sample().Encode();
  EXPECT_EQ(text.rfind("fanstore-manifest 1\n", 0), 0u);
  EXPECT_NE(text.find("source /data/my%20set/with%25odd%0Aname%FF\n"), std::string::npos);
}

TEST(Manifest, AnyFlippedByteIsDetected) {
  const std::string good = Sample().Encode();
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x01);
    EXPECT_FALSE(Manifest::Decode(bad).ok()) << "byte " << i;
  }
}

TEST(Manifest, TruncationIsDetected) {
  const std::string good = Sample().Encode();
  for (size_t n : {size_t{0}, size_t{5}, good.size() / 2, good.size() - 2})
    EXPECT_FALSE(Manifest::Decode(good.substr(0, n)).ok()) << n;
}

TEST(Manifest, OtherVersionIsNamed) {
  std::string text = Sample().Encode();
  text[18] = '2';
  auto d = Manifest::Decode(text);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("version"), std::string::npos);
}

TEST(EscapeField, RoundTripsEveryByte) {
  std::string all;
  for (int c = 1; c < 256; ++c) all += static_cast<char>(c);
  auto back = UnescapeField(EscapeField(all));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, all);
  EXPECT_FALSE(UnescapeField("abc%4").ok());
}

}  // namespace
}  // namespace fanstore::meta
