#include "meta/namespace_image.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "meta/dataset.h"
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

}  // namespace
}  // namespace fanstore::meta
