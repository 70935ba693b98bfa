// The bound of the node's mapped copies (io/mapped_copies.h): which copies make room for a
// new one, and which directory names are copies.
#include "io/mapped_copies.h"

#include <gtest/gtest.h>

namespace fanstore::io {
namespace {

TEST(MappedCopies, NamesOfFinishedCopiesOnly) {
  EXPECT_TRUE(IsMappedCopyName("mapped-0"));
  EXPECT_TRUE(IsMappedCopyName("mapped-123456"));
  EXPECT_FALSE(IsMappedCopyName("mapped-"));
  EXPECT_FALSE(IsMappedCopyName("mapped-12.4711.tmp"));  // being written
  EXPECT_FALSE(IsMappedCopyName("arena"));
  EXPECT_FALSE(IsMappedCopyName("xmapped-1"));
}

TEST(MappedCopies, NothingRemovedWhenTheNewCopyFits) {
  const std::vector<MappedCopy> copies{{10, 3}, {20, 1}};
  EXPECT_TRUE(CopiesToRemove(copies, 70, 100).empty());
  EXPECT_TRUE(CopiesToRemove({}, 100, 100).empty());
}

TEST(MappedCopies, LeastRecentlyUsedFirstAndNoMoreThanNeeded) {
  // used at 5, 1, 9, 3: the order of removal is 1, 3, 5, 9 (indexes 1, 3, 0, 2)
  const std::vector<MappedCopy> copies{{30, 5}, {30, 1}, {30, 9}, {30, 3}};
  // (120 bytes held; the new copy's bytes are added)
  EXPECT_EQ(CopiesToRemove(copies, 30, 120), (std::vector<size_t>{1}));        // 150 -> 120
  EXPECT_EQ(CopiesToRemove(copies, 31, 120), (std::vector<size_t>{1, 3}));     // 151 -> 91
  EXPECT_EQ(CopiesToRemove(copies, 61, 120), (std::vector<size_t>{1, 3, 0}));  // 181 -> 91
}

TEST(MappedCopies, AllGoForAMemberLargerThanTheBound) {
  const std::vector<MappedCopy> copies{{30, 2}, {30, 1}};
  EXPECT_EQ(CopiesToRemove(copies, 500, 100), (std::vector<size_t>{1, 0}));
}

}  // namespace
}  // namespace fanstore::io
