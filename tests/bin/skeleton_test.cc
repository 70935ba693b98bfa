// The removal of fanrun's skeleton at the end of a job (bin/fanrun_skeleton.cc): every
// directory it made goes, children before parents, several parents' children in parallel,
// and nothing it did not make.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bin/fanrun_node_parts.h"

namespace fanstore::fanrun {
namespace {

namespace fs = std::filesystem;

// A mount point with two missing parents, under it three levels of dataset directories
// (six parents at the deepest level), made and left search-only as MakeSkeleton leaves
// them, in its order (parents before children); beside them a directory of the user's own.
TEST(Skeleton, RemovesWhatItMadeDeepestFirstAndNothingElse) {
  char t[] = "/tmp/fanrun-skeleton-XXXXXX";
  ASSERT_NE(::mkdtemp(t), nullptr);
  const std::string root = t;
  const std::string mount = root + "/a/b/mnt";
  std::vector<std::string> made = {root + "/a", root + "/a/b", mount};
  for (const char* split : {"train", "val"}) {
    made.push_back(mount + "/" + split);
    for (int c = 0; c < 3; ++c) {
      const std::string cls = mount + "/" + split + "/c" + std::to_string(c);
      made.push_back(cls);
      for (int d = 0; d < 4; ++d) made.push_back(cls + "/d" + std::to_string(d));
    }
  }
  for (const std::string& d : made) ASSERT_EQ(::mkdir(d.c_str(), 0755), 0) << d;
  fs::create_directory(root + "/a/mine");
  std::ofstream(root + "/a/mine/file") << "kept";
  for (const std::string& d : made) {
    if (d.compare(0, mount.size(), mount) == 0) {
      ASSERT_EQ(::chmod(d.c_str(), 0111), 0);
    }
  }

  RemoveSkeleton(made, mount);

  EXPECT_FALSE(fs::exists(root + "/a/b")) << "a directory it made is left";
  EXPECT_TRUE(fs::exists(root + "/a/mine/file")) << "the user's own was removed";
  EXPECT_TRUE(fs::exists(root + "/a")) << "a parent with the user's directory in it went";
  fs::remove_all(root);
}

}  // namespace
}  // namespace fanstore::fanrun
