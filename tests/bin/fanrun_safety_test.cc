// fanrun's choices on a shared node: which directories it trusts (bin/private_dir.h) and
// where a dataset may be mounted by default (bin/mount_choice.h).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "bin/mount_choice.h"
#include "bin/private_dir.h"

namespace fanstore::fanrun {
namespace {

namespace fs = std::filesystem;

class SharedNode : public ::testing::Test {
 protected:
  void SetUp() override {
    char t[] = "/tmp/fanrun-safety-XXXXXX";
    ASSERT_NE(::mkdtemp(t), nullptr);
    dir_ = t;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(SharedNode, PrivateDirIsMadeWithMode0700) {
  auto id = MakePrivateDir(dir_ + "/p");
  ASSERT_TRUE(id.ok()) << id.status().message();
  struct stat st;
  ASSERT_EQ(::stat((dir_ + "/p").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(id->ino, st.st_ino);
}

TEST_F(SharedNode, DirectoryOthersCanWriteIsNotPrivate) {
  const std::string p = dir_ + "/open";
  ASSERT_EQ(::mkdir(p.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(p.c_str(), 0777), 0);
  auto id = CheckPrivateDir(p);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().message(), p + ": mode 0777: others can write to it");
}

TEST_F(SharedNode, SymlinkToAPrivateDirIsNotPrivate) {
  ASSERT_TRUE(MakePrivateDir(dir_ + "/real").ok());
  ASSERT_EQ(::symlink((dir_ + "/real").c_str(), (dir_ + "/link").c_str()), 0);
  auto id = CheckPrivateDir(dir_ + "/link");
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().message(), dir_ + "/link: a symbolic link");
}

TEST_F(SharedNode, PlainFileIsNotPrivate) {
  std::ofstream(dir_ + "/f") << "x";
  auto id = MakePrivateDir(dir_ + "/f");
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().message(), dir_ + "/f: not a directory");
}

TEST_F(SharedNode, DirectoryOfAnotherUserIsNotPrivate) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another uid";
  const std::string p = dir_ + "/theirs";
  ASSERT_EQ(::mkdir(p.c_str(), 0700), 0);
  ASSERT_EQ(::chown(p.c_str(), 4242, 4242), 0);
  auto id = CheckPrivateDir(p);
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.status().message().find("owned by uid 4242, not by you"), std::string::npos)
      << id.status().message();
}

TEST_F(SharedNode, FreshPrivateDirsGetDistinctUnpredictableNames) {
  auto a = MakeFreshPrivateDir(dir_ + "/job-");
  auto b = MakeFreshPrivateDir(dir_ + "/job-");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);
  EXPECT_EQ(a->size(), (dir_ + "/job-").size() + 6);
  EXPECT_TRUE(CheckPrivateDir(*a).ok());
}

TEST_F(SharedNode, RemoveIfSameRemovesOnlyTheDirectoryItMade) {
  const std::string p = dir_ + "/local";
  auto id = MakePrivateDir(p);
  ASSERT_TRUE(id.ok());
  std::ofstream(p + "/blob") << "bytes";
  // Replaced by another directory of the same name: not removed.
  ASSERT_EQ(::rename(p.c_str(), (dir_ + "/moved").c_str()), 0);
  ASSERT_EQ(::mkdir(p.c_str(), 0700), 0);
  std::ofstream(p + "/precious") << "keep";
  EXPECT_FALSE(RemoveIfSame(p, *id));
  EXPECT_TRUE(fs::exists(p + "/precious"));
  // Replaced by a link to it: not removed, and nothing behind the link either.
  fs::remove_all(p);
  ASSERT_EQ(::symlink((dir_ + "/moved").c_str(), p.c_str()), 0);
  EXPECT_FALSE(RemoveIfSame(p, *id));
  EXPECT_TRUE(fs::exists(dir_ + "/moved/blob"));
  // The directory itself: removed.
  EXPECT_TRUE(RemoveIfSame(dir_ + "/moved", *id));
  EXPECT_FALSE(fs::exists(dir_ + "/moved"));
}

TEST(DirId, RoundTripsThroughText) {
  DirId id{0x803, 123456789}, back;
  ASSERT_TRUE(ParseDirId(FormatDirId(id), &back));
  EXPECT_EQ(back, id);
  EXPECT_FALSE(ParseDirId("/dev/shm/../../home/a/precious", &back));
  EXPECT_FALSE(ParseDirId("1:2x", &back));
}

TEST(SystemPathReason, SystemDirectoriesAndWhatHidesCode) {
  struct Case {
    const char* path;
    const char* reason;
  } cases[] = {
      {"/", "a system directory"},
      {"/usr", "a system directory"},
      {"/usr/local/lib/python3.11/dist-packages", "a Python package directory"},
      {"/etc", "a system directory"},
      {"/lib64", "a system directory"},
      {"/var/lib/x", "a system directory"},
      {"/opt/data", "a system directory"},
      {"/proc/self", "a system directory"},
      {"/dev", "a system directory"},
      {"/dev/shm", "a system directory"},
      {"/home/a/.local/lib", "a hidden directory"},
      {"/home/a/venv/lib/python3.11/site-packages", "a Python package directory"},
      {"/dev/shm/data", ""},
      {"/var/tmp/data", ""},
      {"/run/user/1000/data", ""},
      {"/home/a/datasets/imagenet", ""},
      {"/scratch/u/imagenet", ""},
      {"/usrdata/imagenet", ""},
      {"/tmp/x", ""},
  };
  for (const Case& c : cases) EXPECT_EQ(SystemPathReason(c.path), c.reason) << c.path;
}

TEST_F(SharedNode, DefaultMountRefusesSystemAndAbnormalPaths) {
  const std::string tail = ": it is not mounted there by default; choose where with --mount DIR";
  EXPECT_EQ(DefaultMountRefusal("/etc"),
            "the dataset was packed from /etc, a system directory" + tail);
  EXPECT_EQ(DefaultMountRefusal("/tmp/../usr/lib"),
            "the dataset was packed from /tmp/../usr/lib, not a normal absolute path" + tail);
  EXPECT_EQ(DefaultMountRefusal("relative/dir"),
            "the dataset was packed from relative/dir, not a normal absolute path" + tail);
  // A link planted on the way to a system directory is seen through.
  ASSERT_EQ(::symlink("/usr/lib", (dir_ + "/l").c_str()), 0);
  EXPECT_NE(DefaultMountRefusal(dir_ + "/l/python3/dist-packages").find("a Python package"),
            std::string::npos);
  EXPECT_NE(DefaultMountRefusal(dir_ + "/l/x").find("which is /usr/lib/x, a system directory"),
            std::string::npos)
      << DefaultMountRefusal(dir_ + "/l/x");
}

TEST_F(SharedNode, DefaultMountRefusesWhatHoldsTheWorkingDirectory) {
  ASSERT_EQ(::mkdir((dir_ + "/proj").c_str(), 0700), 0);
  char old[4096];
  ASSERT_NE(::getcwd(old, sizeof old), nullptr);
  ASSERT_EQ(::chdir((dir_ + "/proj").c_str()), 0);
  const std::string why = DefaultMountRefusal(dir_);
  ASSERT_EQ(::chdir(old), 0);
  EXPECT_NE(why.find("which holds the working directory"), std::string::npos) << why;
}

TEST_F(SharedNode, DefaultMountAcceptsTheUsersOwnPlaces) {
  EXPECT_EQ(DefaultMountRefusal(dir_), "");                         // exists, ours
  EXPECT_EQ(DefaultMountRefusal(dir_ + "/new/deeper"), "");         // below ours
  EXPECT_EQ(DefaultMountRefusal("/tmp/fanrun-safety-none/x"), "");  // below sticky /tmp
}

TEST_F(SharedNode, DefaultMountRefusesAnotherUsersDirectory) {
  if (::geteuid() == 0) GTEST_SKIP() << "root may make a directory anywhere";
  EXPECT_NE(DefaultMountRefusal("/home").find("not yours"), std::string::npos);
}

}  // namespace
}  // namespace fanstore::fanrun
