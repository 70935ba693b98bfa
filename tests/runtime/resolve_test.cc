// Path resolution (runtime/paths/resolve.h) in one process, without the hook, over a small packed
// tree (tests/runtime/attached_image.h): (dirfd, path, flags) against what the kernel would
// answer (an entry, an errno, a native path, or the kernel's own: native), one behaviour
// per test.
#include "runtime/paths/resolve.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "meta/namespace_image.h"
#include "runtime/process/fd_table.h"
#include "runtime/process/state.h"
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

// Checks one row: what Resolve gives for (dirfd, path, flags).
void Expect(const Case& c) {
  SCOPED_TRACE(std::string(c.path) + (c.flags & kFollow ? " (follow)" : " (no follow)"));
  const Resolved r = Resolve(c.dirfd, c.path, c.flags);
  ASSERT_EQ(r.kind, c.kind) << "err " << r.err << " path " << r.path;
  if (c.kind == Resolved::kVirtual) {
    const uint32_t want = Get()->ns.Lookup(c.want);
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

std::string Under(const char* rest) {
  return std::string(AttachedImage::kMount) + rest;
}

TEST_F(ResolveTest, UncleanSpellingsFindTheSameEntry) {
  Expect({AT_FDCWD, Under("").c_str(), kFollow, Resolved::kVirtual, ""});
  Expect({AT_FDCWD, Under("/").c_str(), kFollow, Resolved::kVirtual, ""});
  Expect({AT_FDCWD, Under("/train/a/x.jpg").c_str(), kFollow, Resolved::kVirtual, "train/a/x.jpg"});
  Expect({AT_FDCWD, Under("//train/./a/../a/x.jpg").c_str(), kFollow, Resolved::kVirtual,
          "train/a/x.jpg"});
}

TEST_F(ResolveTest, ATrailingSlashAfterAFileIsEnotdir) {
  Expect({AT_FDCWD, Under("/train/a/x.jpg/").c_str(), kFollow, Resolved::kError, nullptr, ENOTDIR});
}

TEST_F(ResolveTest, MissingNamesAreEnoent) {
  Expect({AT_FDCWD, Under("/nothing").c_str(), kFollow, Resolved::kError, nullptr, ENOENT});
  Expect({AT_FDCWD, Under("/train/nothing/x").c_str(), kFollow, Resolved::kError, nullptr, ENOENT});
}

TEST_F(ResolveTest, AFinalSymlinkIsFollowedOnlyWhenAsked) {
  Expect({AT_FDCWD, Under("/link").c_str(), kFollow, Resolved::kVirtual, "train/a/x.jpg"});
  Expect({AT_FDCWD, Under("/link").c_str(), 0, Resolved::kVirtual, "link"});
}

TEST_F(ResolveTest, ASymlinkedDirectoryOnTheWayIsFollowed) {
  // its target spelled with ".."
  Expect({AT_FDCWD, Under("/val/up/b/y.jpg").c_str(), 0, Resolved::kVirtual, "train/b/y.jpg"});
}

TEST_F(ResolveTest, DotDotAfterASymlinkGoesToTheTargetsParent) {
  Expect({AT_FDCWD, Under("/val/up/../val/v.txt").c_str(), 0, Resolved::kVirtual, "val/v.txt"});
}

TEST_F(ResolveTest, ASymlinkOutOfTheDatasetIsTheKernels) {
  Expect({AT_FDCWD, Under("/out").c_str(), kFollow, Resolved::kRewritten, "/etc/hostname"});
  Expect({AT_FDCWD, Under("/out").c_str(), 0, Resolved::kVirtual, "out"});
}

TEST_F(ResolveTest, DotDotAboveMountLeavesDataset) {
  Expect({AT_FDCWD, Under("/..").c_str(), kFollow, Resolved::kRewritten, "/fanstore-unit-test"});
  Expect({AT_FDCWD, Under("/../other").c_str(), kFollow, Resolved::kRewritten,
          "/fanstore-unit-test/other"});
}

TEST_F(ResolveTest, ASymlinkLoopIsEloop) {
  Expect({AT_FDCWD, Under("/loop1").c_str(), kFollow, Resolved::kError, nullptr, ELOOP});
  Expect({AT_FDCWD, Under("/loop1").c_str(), 0, Resolved::kVirtual, "loop1"});
}

TEST_F(ResolveTest, OutAndBackInThroughTheMountPointsName) {
  Expect({AT_FDCWD, Under("/train/../../ds/val").c_str(), kFollow, Resolved::kVirtual, "val"});
}

TEST_F(ResolveTest, PathsOutsideTheDatasetAreNative) {
  Expect({AT_FDCWD, "/etc/passwd", kFollow, Resolved::kNative, nullptr});
  Expect({AT_FDCWD, Under("x/train").c_str(), kFollow, Resolved::kNative, nullptr});  // a sibling
  Expect({AT_FDCWD, "", kFollow, Resolved::kNative, nullptr});
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
