// The archive packer's parts, each alone: source names and brace ranges, the cut into
// groups, the worker pool's order, and a directory read as an archive. The whole packer
// (groups read in parallel, then merged) is tested end to end by archive_pack_test.sh.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "compress/crc32c.h"
#include "meta/archive_sources.h"
#include "meta/dir_reader.h"
#include "meta/encode_pool.h"
#include "meta/pack_plan.h"

namespace fanstore::meta::archive_pack {
namespace {

TEST(ArchiveSources, SuffixesAreStrippedLongestFirst) {
  EXPECT_EQ(StripArchiveSuffix("train.tar.gz"), "train");
  EXPECT_EQ(StripArchiveSuffix("shard-0001.tzst"), "shard-0001");
  EXPECT_EQ(StripArchiveSuffix("val.zip"), "val");
  EXPECT_EQ(StripArchiveSuffix("notes.txt"), "notes.txt");
  EXPECT_EQ(StripArchiveSuffix(".tar"), ".tar");  // nothing left: not an archive name
  EXPECT_TRUE(HasTarSuffix("a.tar.xz"));
  EXPECT_TRUE(HasTarSuffix("a.tgz"));
  EXPECT_FALSE(HasTarSuffix("a.zip"));
  EXPECT_FALSE(HasTarSuffix("a.tar.bz2"));
}

TEST(ArchiveSources, BraceRangesKeepTheirWidth) {
  std::vector<std::string> out;
  ASSERT_TRUE(ExpandBraces("s-{08..11}.tar", out).ok());
  EXPECT_EQ(out, (std::vector<std::string>{"s-08.tar", "s-09.tar", "s-10.tar", "s-11.tar"}));
  out.clear();
  ASSERT_TRUE(ExpandBraces("d{1..2}/p{0..1}", out).ok());
  EXPECT_EQ(out, (std::vector<std::string>{"d1/p0", "d1/p1", "d2/p0", "d2/p1"}));
  out.clear();
  ASSERT_TRUE(ExpandBraces("x{a..c}.tar", out).ok());  // not numeric: left for the glob
  EXPECT_EQ(out, (std::vector<std::string>{"x{a..c}.tar"}));
  out.clear();
  const Status backwards = ExpandBraces("x{9..1}", out);
  EXPECT_FALSE(backwards.ok());
  EXPECT_NE(backwards.message().find("empty or too large"), std::string::npos);
  EXPECT_FALSE(ExpandBraces("x{0..99999999}", out).ok());
}

uint32_t CapSum(const std::vector<Group>& gs) {
  uint32_t n = 0;
  for (const Group& g : gs) n += g.cap;
  return n;
}

TEST(ArchiveSources, GroupsWithPartitionsShareThemOutByBytes) {
  PackOptions o;
  o.partitions = 5;
  const std::vector<std::string> src = {"a", "b", "c", "d", "e", "f", "g", "h"};
  const std::vector<uint64_t> sizes = {100, 100, 100, 100, 100, 100, 100, 700};
  const std::vector<Group> gs = MakeGroups(src, sizes, o);
  ASSERT_FALSE(gs.empty());
  EXPECT_LE(gs.size(), 5u);
  EXPECT_EQ(CapSum(gs), 5u);
  size_t n = 0;
  for (const Group& g : gs) {
    EXPECT_GE(g.cap, 1u);
    EXPECT_GE(g.target, 1u);
    n += g.sources.size();
  }
  EXPECT_EQ(n, src.size());
  EXPECT_EQ(gs.back().sources.back(), "h");  // order kept
  EXPECT_GE(gs.back().cap, 2u);              // the largest source gets the most partitions
}

TEST(ArchiveSources, BroadcastIsOneGroupAndDefaultsCutBy256MiB) {
  PackOptions o;
  o.broadcast = {"val/**"};
  EXPECT_EQ(MakeGroups({"a", "b"}, {1, 2}, o).size(), 1u);
  PackOptions d;
  const uint64_t big = kDefaultPartitionBytes;
  const std::vector<Group> gs = MakeGroups({"a", "b", "c", "d"}, {big, 10, big, 10}, d);
  ASSERT_EQ(gs.size(), 3u);  // a | b c | d: a new group once the last holds 256 MiB
  EXPECT_EQ(gs[1].sources, (std::vector<std::string>{"b", "c"}));
  for (const Group& g : gs) EXPECT_EQ(g.target, kDefaultPartitionBytes);
}

TEST(EncodePool, ResultsComeBackInTheOrderHandedOver) {
  auto mode = CompressMode::Parse("none");
  ASSERT_TRUE(mode.ok());
  EncodePool pool(3, *mode);
  std::vector<std::unique_ptr<EncodePool::Job>> jobs;
  std::vector<uint32_t> want;
  for (int i = 0; i < 64; ++i) {
    std::vector<uint8_t> raw(1000 + 37 * i);
    std::iota(raw.begin(), raw.end(), static_cast<uint8_t>(i));
    want.push_back(compress::Crc32c(0, raw.data(), raw.size()));
    jobs.push_back(pool.Submit(std::move(raw)));
  }
  for (int i = 0; i < 64; ++i) {
    pack_parts::Encoded e = pool.Take(*jobs[i]);
    ASSERT_TRUE(e.status.ok());
    EXPECT_EQ(e.crc, want[i]) << i;
    EXPECT_EQ(e.bytes.size(), 1000u + 37 * i);
  }
}

class DirReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fanstore-dirreader-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    std::filesystem::create_directories(root_ + "/d");
    std::ofstream(root_ + "/d/one") << "first file";
    std::ofstream(root_ + "/two") << "second";
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::string root_;
};

TEST_F(DirReaderTest, ReadsTheTreeInPathOrder) {
  auto scan = ScanTree(root_, [](const std::string&) {});
  ASSERT_TRUE(scan.ok());
  DirReader r(root_, std::move(*scan));
  ASSERT_TRUE(r.Open().ok());
  std::vector<std::string> seen;
  ArchiveEntry e;
  for (;;) {
    auto more = r.Next(&e);
    ASSERT_TRUE(more.ok()) << more.status().message();
    if (!*more) break;
    std::string data(e.type == ArchiveEntry::kFile ? e.size : 0, '\0');
    size_t got = 0;
    while (got < data.size()) {
      auto k = r.ReadData(reinterpret_cast<uint8_t*>(data.data()) + got, data.size() - got);
      ASSERT_TRUE(k.ok());
      ASSERT_GT(*k, 0u);
      got += *k;
    }
    seen.push_back(e.path + (e.type == ArchiveEntry::kDir ? "/" : "=" + data));
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"d/", "d/one=first file", "two=second"}));
}

TEST_F(DirReaderTest, AFileThatShrankSinceTheScanIsAnError) {
  auto scan = ScanTree(root_, [](const std::string&) {});
  ASSERT_TRUE(scan.ok());
  ASSERT_EQ(::truncate((root_ + "/two").c_str(), 2), 0);
  DirReader r(root_, std::move(*scan));
  ASSERT_TRUE(r.Open().ok());
  ArchiveEntry e;
  Status failed;
  for (;;) {
    auto more = r.Next(&e);
    ASSERT_TRUE(more.ok());
    if (!*more) break;
    uint8_t buf[64];
    for (;;) {
      auto k = r.ReadData(buf, sizeof buf);
      if (!k.ok()) {
        failed = k.status();
        break;
      }
      if (*k == 0) break;
    }
  }
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.message(), root_ + "/two: file changed while packing (it shrank)");
}

}  // namespace
}  // namespace fanstore::meta::archive_pack
