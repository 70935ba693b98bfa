#include "meta/namespace_image.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "meta/dataset.h"
#include "meta/exchange.h"
#include "meta/pack.h"
#include "tests/testutil.h"

namespace fanstore::meta {
namespace {

namespace fs = std::filesystem;

class NamespaceImageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int c = 0; c < 3; ++c)
      for (int i = 0; i < 20; ++i)
        testing::WriteFile(t_ / ("src/train/c" + std::to_string(c) + "/f" + std::to_string(i)),
                           std::string(100 + i * c, 'x'));
    testing::WriteFile(t_ / "src/val/v.txt", "val");
    fs::create_directories(t_ / "src/empty");
    fs::create_symlink("train/c0/f1", t_ / "src/link");
    PackOptions o;
    o.src = t_ / "src";
    o.out = t_ / "out";
    o.partitions = 3;
    o.broadcast = {"val/**"};
    ASSERT_TRUE(Pack(o).ok());
    auto ds = Dataset::Open(t_ / "out");
    ASSERT_TRUE(ds.ok());
    ds_ = std::move(ds.value());
    std::vector<std::string> parts;
    for (size_t p = 0; p < ds_->partitions().size(); ++p) parts.push_back("/p" + std::to_string(p));
    bytes_ = BuildNamespaceImage(*ds_, parts);
  }
  NamespaceView View() {
    auto v =
        NamespaceView::Attach({reinterpret_cast<const uint8_t*>(bytes_.data()), bytes_.size()});
    EXPECT_TRUE(v.ok()) << v.status().message();
    return *v;
  }

  testing::TempDir t_;
  std::unique_ptr<Dataset> ds_;
  std::string bytes_;
};

TEST_F(NamespaceImageTest, EveryMemberIsFoundWithItsMetadataAndPartition) {
  const NamespaceView v = View();
  size_t checked = 0;
  for (uint32_t p = 0; p < ds_->partitions().size(); ++p) {
    const auto& part = ds_->partitions()[p];
    for (size_t i = 0; i < part.size(); ++i) {
      const MemberView m = part.member(i);
      const uint32_t e = v.Lookup(m.path);
      ASSERT_NE(e, kNoEntry) << m.path;
      const ImageEntry& ie = v.entry(e);
      EXPECT_EQ(v.path(ie), m.path);
      EXPECT_EQ(ie.mode, m.rec.mode) << m.path;
      EXPECT_EQ(ie.size, m.rec.size) << m.path;
      if (m.kind() != Kind::kDir) {
        EXPECT_EQ(ie.partition, p) << m.path;
        EXPECT_EQ(ie.data_offset, m.rec.data_offset) << m.path;
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 60u);
  EXPECT_EQ(v.target(v.entry(v.Lookup("link"))), "train/c0/f1");
  EXPECT_EQ(v.partition_count(), 4u);
  EXPECT_STREQ(v.partition_path(3), "/p3");
}

TEST_F(NamespaceImageTest, MissingPathsMiss) {
  const NamespaceView v = View();
  for (const char* p : {"nope", "train/c0/f99", "train/c0/", "/train", "train//c0", "trai"})
    EXPECT_EQ(v.Lookup(p), kNoEntry) << p;
  EXPECT_EQ(v.Lookup(""), 0u);  // the root
}

TEST_F(NamespaceImageTest, ChildrenAreInNameOrderAndDirectoriesCountTheirLinks) {
  const NamespaceView v = View();
  const ImageEntry& root = v.entry(0);
  std::vector<std::string> names;
  for (uint32_t k = 0; k < root.child_count; ++k)
    names.emplace_back(v.name(v.entry(v.Child(root, k))));
  EXPECT_EQ(names, (std::vector<std::string>{"empty", "link", "train", "val"}));
  EXPECT_EQ(root.nlink, 2u + 3u);                        // empty, train, val
  EXPECT_EQ(v.entry(v.Lookup("train")).nlink, 2u + 3u);  // c0, c1, c2
  EXPECT_EQ(v.entry(v.Lookup("train/c1")).child_count, 20u);
  EXPECT_EQ(v.entry(v.Lookup("train/c1/f3")).parent, v.Lookup("train/c1"));
}

TEST_F(NamespaceImageTest, DamagedImagesAreRefused) {
  auto attach = [](const std::string& b) {
    return NamespaceView::Attach({reinterpret_cast<const uint8_t*>(b.data()), b.size()}).ok();
  };
  EXPECT_FALSE(attach(bytes_.substr(0, bytes_.size() - 1)));  // truncated
  EXPECT_FALSE(attach(bytes_.substr(0, 10)));
  std::string bad = bytes_;
  bad[0] = 'X';
  EXPECT_FALSE(attach(bad));
}

// The multi-node path: every partition encoded (as nodes do before the Allgatherv), the
// blocks concatenated in any order, decoded and built: the same image as on one node.
TEST_F(NamespaceImageTest, ExchangedMembersBuildTheSameImage) {
  std::string wire;
  for (uint32_t p = static_cast<uint32_t>(ds_->partitions().size()); p-- > 0;)
    EncodeMembers(ds_->partitions()[p], p, &wire);
  auto members = DecodeMembers(wire, static_cast<uint32_t>(ds_->partitions().size()));
  ASSERT_TRUE(members.ok()) << members.status().message();
  std::vector<std::string> parts;
  for (size_t p = 0; p < ds_->partitions().size(); ++p) parts.push_back("/p" + std::to_string(p));
  auto image = BuildNamespaceImage(std::move(members.value()), parts, ds_->manifest().dataset_id);
  ASSERT_TRUE(image.ok()) << image.status().message();
  EXPECT_TRUE(*image == bytes_) << "the images differ";
}

TEST_F(NamespaceImageTest, DamagedExchangeBlocksAreRefused) {
  std::string wire;
  EncodeMembers(ds_->partitions()[0], 0, &wire);
  const uint32_t parts = static_cast<uint32_t>(ds_->partitions().size());
  ASSERT_TRUE(DecodeMembers(wire, parts).ok());
  for (size_t cut : {size_t{1}, size_t{30}, wire.size() - 1})
    EXPECT_FALSE(DecodeMembers(std::string_view(wire).substr(0, cut), parts).ok()) << cut;
  std::string bad = wire;
  bad[32] = static_cast<char>(parts);  // partition id (path_offset) out of range
  EXPECT_FALSE(DecodeMembers(bad, parts).ok());
  bad = wire;
  bad[60] = 9;  // kind
  EXPECT_FALSE(DecodeMembers(bad, parts).ok());
}

TEST_F(NamespaceImageTest, DuplicateFilesAndOrphansAreRefused) {
  std::vector<NsMember> all;
  for (uint32_t p = 0; p < ds_->partitions().size(); ++p) AppendMembers(ds_->partitions()[p], p, &all);
  const std::vector<std::string> parts(ds_->partitions().size(), "");
  std::vector<NsMember> dup = all;
  for (const NsMember& m : all)
    if (m.rec.kind == static_cast<uint8_t>(Kind::kFile)) {
      dup.push_back(m);
      dup.back().partition = 1;
      break;
    }
  auto r = BuildNamespaceImage(dup, parts, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("is in partitions"), std::string::npos);
  std::vector<NsMember> orphan = all;
  orphan.push_back(all.back());
  orphan.back().path = "no/such/dir/file";
  EXPECT_FALSE(BuildNamespaceImage(orphan, parts, 1).ok());
  // Partition ids past 16 bits survive into the image.
  std::vector<NsMember> big = all;
  for (NsMember& m : big) m.partition = kMaxPartitions - 1 - (m.partition != 0);
  auto image = BuildNamespaceImage(big, std::vector<std::string>(kMaxPartitions, ""), 1);
  ASSERT_TRUE(image.ok()) << image.status().message();
  auto v = NamespaceView::Attach({reinterpret_cast<const uint8_t*>(image->data()), image->size()});
  ASSERT_TRUE(v.ok());
  EXPECT_GE(v->entry(v->Lookup("train/c1/f3")).partition, kMaxPartitions - 2);
  EXPECT_EQ(std::string(v->partition_path(kMaxPartitions - 1)), "");
}

}  // namespace
}  // namespace fanstore::meta
