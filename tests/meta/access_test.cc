#include "meta/access.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

namespace fanstore::meta {
namespace {

TEST(MayAccess, OneClassAppliesAndNeverFallsThrough) {
  const uint32_t groups[] = {50, 60};
  const Credentials owner{1000, 100, nullptr, 0};
  const Credentials member{2000, 200, groups, 2};  // group 60 only as a supplementary group
  const Credentials other{3000, 300, nullptr, 0};
  struct Case {
    uint32_t mode;
    const Credentials& who;
    unsigned want;
    bool granted;
  } cases[] = {
      {S_IFREG | 0600, owner, kMayRead, true},
      {S_IFREG | 0600, member, kMayRead, false},
      {S_IFREG | 0600, other, kMayRead, false},
      {S_IFREG | 0640, member, kMayRead, true},   // through a supplementary group
      {S_IFREG | 0604, member, kMayRead, false},  // the group's class denies: no fall-through
      {S_IFREG | 0044, owner, kMayRead, false},   // the owner's class denies
      {S_IFREG | 0604, other, kMayRead, true},
      {S_IFDIR | 0700, other, kMayExec, false},
      {S_IFDIR | 0711, other, kMayExec, true},
      {S_IFDIR | 0750, member, kMayExec | kMayRead, true},
      {S_IFREG | 0644, owner, kMayExec, false},
  };
  for (const Case& c : cases)
    EXPECT_EQ(MayAccess(c.who, c.mode, 1000, 60, c.want), c.granted)
        << std::oct << c.mode << " uid " << std::dec << c.who.uid << " want " << c.want;
}

TEST(MayAccess, RootReadsAndSearchesAllButExecutesOnlyWithAnExecuteBit) {
  const Credentials root{0, 0, nullptr, 0};
  EXPECT_TRUE(MayAccess(root, S_IFREG | 0000, 1000, 1000, kMayRead));
  EXPECT_TRUE(MayAccess(root, S_IFDIR | 0000, 1000, 1000, kMayExec | kMayRead));
  EXPECT_FALSE(MayAccess(root, S_IFREG | 0644, 1000, 1000, kMayExec));
  EXPECT_TRUE(MayAccess(root, S_IFREG | 0100, 1000, 1000, kMayExec));
}

TEST(OpenToAll, OnlyWhenEveryClassGrants) {
  EXPECT_TRUE(OpenToAll(S_IFDIR | 0755, kMayExec));
  EXPECT_TRUE(OpenToAll(S_IFREG | 0444, kMayRead));
  EXPECT_FALSE(OpenToAll(S_IFREG | 0640, kMayRead));
  EXPECT_FALSE(OpenToAll(S_IFREG | 0044, kMayRead));  // the owner is denied
  EXPECT_FALSE(OpenToAll(S_IFDIR | 0754, kMayExec));
}

}  // namespace
}  // namespace fanstore::meta
