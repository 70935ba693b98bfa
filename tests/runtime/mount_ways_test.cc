// The ways from a native directory to the mount point (runtime/names/mount_ways.h): which
// directories are above it, the way up and down from elsewhere, and which relative paths
// follow a way into the dataset.
#include "runtime/names/mount_ways.h"

#include <gtest/gtest.h>

namespace fanstore::runtime {
namespace {

TEST(MountWays, DownFromDirectoriesAboveOnly) {
  std::string_view down;
  EXPECT_TRUE(DownFromAbove("/scratch", "/scratch/data/imagenet", &down));
  EXPECT_EQ(down, "data/imagenet");
  EXPECT_TRUE(DownFromAbove("/", "/scratch/data", &down));
  EXPECT_EQ(down, "scratch/data");
  EXPECT_FALSE(DownFromAbove("/scratch/dat", "/scratch/data/imagenet", &down));  // a name's prefix
  EXPECT_FALSE(DownFromAbove("/scratch/data/imagenet", "/scratch/data/imagenet", &down));  // at it
  EXPECT_FALSE(DownFromAbove("/scratch/data/imagenet/train", "/scratch/data/imagenet", &down));
  EXPECT_FALSE(DownFromAbove("/other", "/scratch/data", &down));
  EXPECT_FALSE(DownFromAbove("/scratch", "", &down));
}

TEST(MountWays, UpAndDownFromElsewhere) {
  EXPECT_EQ(WayUpAndDown("/repo/code", "/repo/data/imagenet"), "../data/imagenet");
  EXPECT_EQ(WayUpAndDown("/repo/code/a/b", "/repo/data"), "../../../data");
  EXPECT_EQ(WayUpAndDown("/repo/dat", "/repo/data/x"), "../data/x");  // components, not bytes
  EXPECT_EQ(WayUpAndDown("/home/u", "/scratch/d"), "../../scratch/d");
  EXPECT_EQ(WayUpAndDown("//repo//code/", "/repo/data"), "../data");  // empty components
  EXPECT_EQ(WayUpAndDown("/repo", "/repo/data"), "");                 // above: not this way
  EXPECT_EQ(WayUpAndDown("/repo/data/x", "/repo/data"), "");          // below: no way out
  EXPECT_EQ(WayUpAndDown("/repo/data", "/repo/data"), "");            // at it
  EXPECT_EQ(WayUpAndDown("repo/code", "/repo/data"), "");             // not absolute
}

TEST(MountWays, RelativePathsThatFollowAWay) {
  std::string_view rest;
  EXPECT_TRUE(BelowMountFromAbove("data/imagenet/train/x.jpg", "data/imagenet", &rest));
  EXPECT_EQ(rest, "/train/x.jpg");
  EXPECT_TRUE(BelowMountFromAbove("./data//./imagenet", "data/imagenet", &rest));
  EXPECT_EQ(rest, "");
  EXPECT_TRUE(BelowMountFromAbove("../data/imagenet/a", "../data/imagenet", &rest));
  EXPECT_EQ(rest, "/a");
  EXPECT_FALSE(BelowMountFromAbove("data", "data/imagenet", &rest));  // ends above the mount
  EXPECT_FALSE(BelowMountFromAbove("data/other/x", "data/imagenet", &rest));
  EXPECT_FALSE(BelowMountFromAbove("code/../data/imagenet", "data/imagenet", &rest));
  EXPECT_FALSE(BelowMountFromAbove("data/imagenetx", "data/imagenet", &rest));
}

TEST(MountWays, ADotDotAfterANativeNameIsResolvedUpToIt) {
  const std::string_view mount = "/repo/data/imagenet";
  auto is_name = [&](std::string_view c) { return IsComponentOf(c, mount); };
  EXPECT_TRUE(IsComponentOf("data", mount));
  EXPECT_FALSE(IsComponentOf("dat", mount));  // a name's prefix
  EXPECT_FALSE(IsComponentOf("", mount));
  EXPECT_EQ(DotDotBeforeName("/repo/code/../data/imagenet/x.jpg", is_name),
            13u);  // "/repo/code/.."
  EXPECT_EQ(DotDotBeforeName("code/../data", is_name), 7u);
  EXPECT_EQ(DotDotBeforeName("../data/imagenet", is_name), 2u);
  EXPECT_EQ(DotDotBeforeName("//a//..//b/../imagenet", is_name),
            7u);  // the first "..", slashes kept
  EXPECT_EQ(DotDotBeforeName("/repo/code/../other/x", is_name), 0u);  // no mount name after it
  EXPECT_EQ(DotDotBeforeName("/repo/data/../code", is_name), 0u);     // names only before it
  EXPECT_EQ(DotDotBeforeName("/repo/data/imagenet/x", is_name), 0u);  // no ".."
  EXPECT_EQ(DotDotBeforeName("/repo/.../data", is_name), 0u);         // "..." is a name
  EXPECT_EQ(DotDotBeforeName("/repo/..x/data", is_name), 0u);
  EXPECT_EQ(DotDotBeforeName("", is_name), 0u);
}

}  // namespace
}  // namespace fanstore::runtime
