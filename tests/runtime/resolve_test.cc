// Path resolution (runtime/resolve.h) in one process, without the hook, over a small packed
// tree (tests/runtime/attached_image.h): (dirfd, path, flags) against a table of what the
// kernel would answer: an entry, an errno, a native path, or the kernel's own (native).
#include "runtime/resolve.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "meta/namespace_image.h"
#include "runtime/fd_table.h"
#include "runtime/state.h"
#include "tests/runtime/attached_image.h"

namespace fanstore::runtime {
namespace {

class ResolveTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_NE(AttachedImage::Get(), nullptr); }
  static uint32_t EntryOf(std::string_view path) { return Get()->ns.Lookup(path); }
};

struct Case {
  int dirfd;
  const char* path;
  int flags;
  Resolved::Kind kind;
  const char* want;  // kVirtual: the entry's path in the dataset; kRewritten: the native path
  int err = 0;       // kError
};

TEST_F(ResolveTest, TableOfPaths) {
  const std::string m = AttachedImage::kMount;
  const std::string paths[] = {m,
                               m + "/",
                               m + "/train/a/x.jpg",
                               m + "//train/./a/../a/x.jpg",
                               m + "/train/a/x.jpg/",
                               m + "/nothing",
                               m + "/train/nothing/x",
                               m + "/link",
                               m + "/val/up/b/y.jpg",
                               m + "/val/up/../val/v.txt",
                               m + "/out",
                               m + "/..",
                               m + "/../other",
                               m + "/loop1",
                               m + "/train/../../ds/val",
                               "/etc/passwd",
                               m + "x/train"};
  const Case cases[] = {
      {AT_FDCWD, paths[0].c_str(), kFollow, Resolved::kVirtual, ""},
      {AT_FDCWD, paths[1].c_str(), kFollow, Resolved::kVirtual, ""},
      {AT_FDCWD, paths[2].c_str(), kFollow, Resolved::kVirtual, "train/a/x.jpg"},
      {AT_FDCWD, paths[3].c_str(), kFollow, Resolved::kVirtual, "train/a/x.jpg"},
      // a trailing slash names a directory
      {AT_FDCWD, paths[4].c_str(), kFollow, Resolved::kError, nullptr, ENOTDIR},
      {AT_FDCWD, paths[5].c_str(), kFollow, Resolved::kError, nullptr, ENOENT},
      {AT_FDCWD, paths[6].c_str(), kFollow, Resolved::kError, nullptr, ENOENT},
      // a final symlink: followed (stat), or itself (lstat)
      {AT_FDCWD, paths[7].c_str(), kFollow, Resolved::kVirtual, "train/a/x.jpg"},
      {AT_FDCWD, paths[7].c_str(), 0, Resolved::kVirtual, "link"},
      // a symlinked directory on the way, its target spelled with ".."
      {AT_FDCWD, paths[8].c_str(), 0, Resolved::kVirtual, "train/b/y.jpg"},
      // ".." after a symlink goes to the target's parent, as the kernel does
      {AT_FDCWD, paths[9].c_str(), 0, Resolved::kVirtual, "val/v.txt"},
      // leaving the dataset: the kernel's, spelled natively
      {AT_FDCWD, paths[10].c_str(), kFollow, Resolved::kRewritten, "/etc/hostname"},
      {AT_FDCWD, paths[10].c_str(), 0, Resolved::kVirtual, "out"},
      {AT_FDCWD, paths[11].c_str(), kFollow, Resolved::kRewritten, "/fanstore-unit-test"},
      {AT_FDCWD, paths[12].c_str(), kFollow, Resolved::kRewritten, "/fanstore-unit-test/other"},
      {AT_FDCWD, paths[13].c_str(), kFollow, Resolved::kError, nullptr, ELOOP},
      {AT_FDCWD, paths[13].c_str(), 0, Resolved::kVirtual, "loop1"},
      // out and back in through the mount point's own name
      {AT_FDCWD, paths[14].c_str(), kFollow, Resolved::kVirtual, "val"},
      // not the dataset's at all
      {AT_FDCWD, paths[15].c_str(), kFollow, Resolved::kNative, nullptr},
      {AT_FDCWD, paths[16].c_str(), kFollow, Resolved::kNative, nullptr},
      {AT_FDCWD, "", kFollow, Resolved::kNative, nullptr},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.path) + (c.flags & kFollow ? " (follow)" : " (no follow)"));
    const Resolved r = Resolve(c.dirfd, c.path, c.flags);
    ASSERT_EQ(r.kind, c.kind) << "err " << r.err << " path " << r.path;
    if (c.kind == Resolved::kVirtual) {
      const uint32_t want = EntryOf(c.want);
      ASSERT_NE(want, meta::kNoEntry) << c.want;
      EXPECT_EQ(r.entry, want) << Get()->ns.path(Get()->ns.entry(r.entry));
    }
    if (c.kind == Resolved::kRewritten) {
      EXPECT_EQ(r.path, c.want);
    }
    if (c.kind == Resolved::kError) {
      EXPECT_EQ(r.err, c.err);
    }
  }
}

TEST_F(ResolveTest, RelativeToAVirtualDirectoryFd) {
  // A virtual fd as the hook makes one: a placeholder bound to the directory's description.
  const int fd = ::open("/dev/null", O_PATH | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const int d = Fds().NewDesc(EntryOf("train"), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(d, 0);
  Fds().Bind(fd, d);
  Resolved r = Resolve(fd, "a/x.jpg", kFollow);
  EXPECT_EQ(r.kind, Resolved::kVirtual);
  EXPECT_EQ(r.entry, EntryOf("train/a/x.jpg"));
  r = Resolve(fd, "../val/v.txt", kFollow);
  EXPECT_EQ(r.kind, Resolved::kVirtual);
  EXPECT_EQ(r.entry, EntryOf("val/v.txt"));
  r = Resolve(fd, "", kFollow | kEmptyOk);  // AT_EMPTY_PATH: the fd itself
  EXPECT_EQ(r.kind, Resolved::kVirtual);
  EXPECT_EQ(r.entry, EntryOf("train"));
  r = Resolve(fd, "", kFollow);  // "" without AT_EMPTY_PATH
  EXPECT_EQ(r.kind, Resolved::kError);
  EXPECT_EQ(r.err, ENOENT);
  r = Resolve(fd, "/etc/passwd", kFollow);  // an absolute path ignores dirfd
  EXPECT_EQ(r.kind, Resolved::kNative);
  EXPECT_TRUE(Fds().Unbind(fd));
  ::close(fd);
}

}  // namespace
}  // namespace fanstore::runtime
