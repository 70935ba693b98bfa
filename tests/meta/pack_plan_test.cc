#include "meta/pack_plan.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "meta/glob.h"

namespace fanstore::meta {
namespace {

TEST(GlobMatch, DoubleStarMatchesAnyDepthIncludingNone) {
  EXPECT_TRUE(GlobMatch("val/**", "val"));
  EXPECT_TRUE(GlobMatch("val/**", "val/a"));
  EXPECT_TRUE(GlobMatch("val/**", "val/a/b/c.jpg"));
  EXPECT_FALSE(GlobMatch("val/**", "valx/a"));
  EXPECT_FALSE(GlobMatch("val/**", "train/val/a"));
  EXPECT_TRUE(GlobMatch("**/*.txt", "a/b/c.txt"));
  EXPECT_TRUE(GlobMatch("**/*.txt", "c.txt"));
}

TEST(GlobMatch, SingleStarStaysInOneComponent) {
  EXPECT_TRUE(GlobMatch("*.csv", "labels.csv"));
  EXPECT_FALSE(GlobMatch("*.csv", "meta/labels.csv"));
  EXPECT_TRUE(GlobMatch("meta/*", "meta/x"));
  EXPECT_FALSE(GlobMatch("meta/*", "meta/x/y"));
}

std::vector<Member> Tree(int files, uint64_t size) {
  std::vector<Member> v;
  Member root;
  root.kind = Kind::kDir;
  v.push_back(root);
  for (const char* d : {"train", "train/c0", "train/c1", "val"}) {
    Member m;
    m.path = d;
    m.kind = Kind::kDir;
    v.push_back(m);
  }
  for (int i = 0; i < files; ++i) {
    Member m;
    m.path = std::string(i % 2 ? "train/c1/" : "train/c0/") + "f" + std::to_string(1000 + i);
    m.size = size;
    v.push_back(m);
    Member val = m;
    val.path = "val/v" + std::to_string(1000 + i);
    v.push_back(val);
  }
  std::sort(v.begin(), v.end(), [](const Member& a, const Member& b) { return a.path < b.path; });
  return v;
}

TEST(PlanPartitions, BalancesBytesAndKeepsEveryDataMemberOnce) {
  const auto members = Tree(100, 1000);
  const auto plans = PlanPartitions(members, 4, {"val/**"});
  ASSERT_EQ(plans.size(), 5u);
  EXPECT_EQ(plans[4].flags, kFlagBroadcast);
  std::vector<int> seen(members.size(), 0);
  for (size_t p = 0; p < plans.size(); ++p) {
    uint64_t bytes = 0;
    for (size_t i : plans[p].members) {
      if (members[i].kind != Kind::kDir) {
        ++seen[i];
        bytes += members[i].size;
        EXPECT_EQ(GlobMatch("val/**", members[i].path), p == 4) << members[i].path;
      }
    }
    if (p < 4) {
      EXPECT_EQ(bytes, 25u * 1000) << "partition " << p;
    }
    EXPECT_EQ(plans[p].members.front(), 0u) << "root first in partition " << p;
    EXPECT_TRUE(std::is_sorted(plans[p].members.begin(), plans[p].members.end()));
  }
  for (size_t i = 0; i < members.size(); ++i)
    EXPECT_EQ(seen[i], members[i].kind == Kind::kDir ? 0 : 1) << members[i].path;
}

TEST(PlanPartitions, EveryPartitionCarriesItsMembersAncestors) {
  const auto members = Tree(10, 1);
  const auto plans = PlanPartitions(members, 3, {});
  for (const auto& plan : plans) {
    std::vector<std::string> paths;
    for (size_t i : plan.members) paths.push_back(members[i].path);
    for (const auto& p : paths) {
      if (p.empty()) continue;
      const std::string parent(ParentPath(p));
      EXPECT_NE(std::find(paths.begin(), paths.end(), parent), paths.end()) << p;
    }
  }
}

TEST(PlanPartitions, EmptyFilesAreSpreadByCount) {
  const auto members = Tree(8, 0);
  const auto plans = PlanPartitions(members, 4, {});
  for (const auto& plan : plans) {
    int files = 0;
    for (size_t i : plan.members) files += members[i].kind == Kind::kFile;
    EXPECT_EQ(files, 4);
  }
}

TEST(PlanPartitions, IsDeterministic) {
  const auto members = Tree(50, 77);
  const auto a = PlanPartitions(members, 7, {"val/**"});
  const auto b = PlanPartitions(members, 7, {"val/**"});
  ASSERT_EQ(a.size(), b.size());
  for (size_t p = 0; p < a.size(); ++p) EXPECT_EQ(a[p].members, b[p].members);
}

TEST(DefaultPartitions, OnePer256MiB) {
  EXPECT_EQ(DefaultPartitions(0), 1u);
  EXPECT_EQ(DefaultPartitions(1), 1u);
  EXPECT_EQ(DefaultPartitions(256ull << 20), 1u);
  EXPECT_EQ(DefaultPartitions((256ull << 20) + 1), 2u);
  EXPECT_EQ(DefaultPartitions(140ull << 30), 560u);
}

}  // namespace
}  // namespace fanstore::meta
