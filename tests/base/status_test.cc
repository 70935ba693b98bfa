// Status: the one-line errors, and telling a system error's kind from its line.
#include "base/status.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace fanstore {
namespace {

TEST(Status, IsErrnoReadsFromErrnosLine) {
  const Status full = Status::FromErrno("/l/part-00001.fsb", ENOSPC);
  EXPECT_EQ(full.message(), "/l/part-00001.fsb: No space left on device");
  EXPECT_TRUE(full.IsErrno(ENOSPC));
  EXPECT_FALSE(full.IsErrno(EDQUOT));
  EXPECT_FALSE(Status::Ok().IsErrno(ENOSPC));
  EXPECT_FALSE(Status::Error("No space left on device").IsErrno(ENOSPC));  // no ": " before it
  EXPECT_FALSE(Status::FromErrno("x", ENOENT).IsErrno(ENOSPC));
}

}  // namespace
}  // namespace fanstore
