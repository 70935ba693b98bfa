// Each kind of member source (runtime/data/member_source.h) against in-memory doubles: a
// memfd for the blob and the agent's private files, a buffer for the node cache arena, and
// the agent's calls (RemoteCalls) replaced by functions that serve pieces from a buffer and
// can report them evicted. And the one policy for a stale source (WithSource).
#include "runtime/data/member_source.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "base/copy_alias.h"
#include "io/pieces.h"
#include "runtime/data/member_io.h"
#include "runtime/process/state.h"
#include "tests/runtime/attached_image.h"

namespace fanstore::runtime {
namespace {

int MemFd(const std::string& bytes) {
  const int fd = ::memfd_create("member-source-test", MFD_CLOEXEC);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  return fd;
}

std::string Pattern(size_t n) {
  std::string s(n, 0);
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + i / 4096) % 26);
  return s;
}

// The agent as the tests want it: pieces of g_stored from the "arena" (the buffer itself),
// evicted while copied `g_stale_left` times, or from a private file on the last attempt.
std::string g_stored;
int g_stale_left = 0;
int g_fetches = 0, g_private = 0;
bool g_arena_still = true;

long FakeFetchPiece(uint32_t, uint64_t p, bool want_fd, RemoteSource* out) {
  ++g_fetches;
  const uint64_t off = io::PieceOffset(p), n = io::PieceLength(g_stored.size(), p);
  if (want_fd) {
    ++g_private;
    out->fd = MemFd(g_stored.substr(off, n));
    return 0;
  }
  out->bytes = reinterpret_cast<const uint8_t*>(g_stored.data()) + off;
  out->word = p;
  return 0;
}
uint32_t FakePieceKey(uint32_t entry, uint64_t p) {
  return static_cast<uint32_t>(entry * 100 + p);
}
bool FakeStill(uint32_t, uint64_t) {
  if (g_stale_left > 0) {
    --g_stale_left;
    return false;
  }
  return g_arena_still;
}

class MemberSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(AttachedImage::Get(), nullptr);  // the runtime's state (PreadBlob's ring)
    saved_ = Remote();
    Remote().fetch_piece = FakeFetchPiece;
    Remote().piece_key = FakePieceKey;
    Remote().still = FakeStill;
    g_stale_left = g_fetches = g_private = 0;
    g_arena_still = true;
  }
  void TearDown() override { Remote() = saved_; }
  RemoteCalls saved_;
};

TEST_F(MemberSourceTest, BlobReadsFromTheMembersOffsetAndAShortBlobIsEio) {
  const std::string blob = "header--" + Pattern(10000);
  const int fd = MemFd(blob);
  {
    const MemberSource src = MemberSource::Blob(fd, 8, 0, 0);
    EXPECT_EQ(src.kind(), MemberSource::Kind::kBlob);
    std::string got(300, 0);
    ASSERT_EQ(src.Read(5000, 300, reinterpret_cast<uint8_t*>(got.data())), 300);
    EXPECT_EQ(got, blob.substr(8 + 5000, 300));
    EXPECT_EQ(src.Read(9900, 200, reinterpret_cast<uint8_t*>(got.data())), -EIO);
    EXPECT_TRUE(src.Still());
  }
  EXPECT_EQ(::fcntl(fd, F_GETFD), FD_CLOEXEC);  // a blob's descriptor is the state's, kept
  ::close(fd);
}

TEST_F(MemberSourceTest, APrivateFileIsReadFromZeroAndClosedWithTheSource) {
  const std::string bytes = Pattern(5000);
  const int fd = MemFd(bytes);
  {
    MemberSource src = MemberSource::File(fd, 0);
    MemberSource moved = std::move(src);  // one owner: the move leaves nothing to close
    EXPECT_EQ(src.kind(), MemberSource::Kind::kNone);
    std::string got(100, 0);
    ASSERT_EQ(moved.Read(4900, 100, reinterpret_cast<uint8_t*>(got.data())), 100);
    EXPECT_EQ(got, bytes.substr(4900));
    EXPECT_EQ(moved.View(0, 100, ViewRule::kAny), nullptr);
  }
  EXPECT_EQ(::fcntl(fd, F_GETFD), -1);
  EXPECT_EQ(errno, EBADF);
}

TEST_F(MemberSourceTest, ArenaBytesAreViewedAndGoStaleWhenEvicted) {
  const std::string bytes = Pattern(4096);
  const MemberSource src =
      MemberSource::Arena(reinterpret_cast<const uint8_t*>(bytes.data()), 7, 3);
  const uint8_t* v = src.View(100, 10, ViewRule::kWhole);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(v), 10), bytes.substr(100, 10));
  uint8_t buf[10];
  long err = 0;
  EXPECT_EQ(src.ViewOrRead(100, 10, buf, ViewRule::kAny, &err), v);  // no copy needed
  EXPECT_TRUE(src.Still());
  g_arena_still = false;
  EXPECT_FALSE(src.Still());
}

TEST_F(MemberSourceTest, PiecesAreFetchedAcrossTheirBoundsAndAnEvictedOneIsCopiedAgain) {
  g_stored = Pattern(2 * io::kPieceBytes + 12345);
  const MemberSource src = MemberSource::Pieces(9, g_stored.size());
  // a range over the first piece boundary
  std::string got(20000, 0);
  const uint64_t off = io::kPieceBytes - 4096;
  ASSERT_EQ(src.Read(off, 8192, reinterpret_cast<uint8_t*>(got.data())), 8192);
  EXPECT_EQ(got.substr(0, 8192), g_stored.substr(off, 8192));
  EXPECT_EQ(g_fetches, 2);
  // the piece evicted twice while copied: fetched three times, the bytes still right
  g_fetches = 0;
  g_stale_left = 2;
  ASSERT_EQ(src.Read(10, 100, reinterpret_cast<uint8_t*>(got.data())), 100);
  EXPECT_EQ(got.substr(0, 100), g_stored.substr(10, 100));
  EXPECT_EQ(g_fetches, 3);
  EXPECT_EQ(g_private, 0);
  // evicted on every attempt from the arena: the last attempt asks for a private file
  g_fetches = 0;
  g_stale_left = kAttempts - 1;
  ASSERT_EQ(src.Read(io::kPieceBytes * 2, 12345, reinterpret_cast<uint8_t*>(got.data())), 12345);
  EXPECT_EQ(got.substr(0, 12345), g_stored.substr(io::kPieceBytes * 2));
  EXPECT_EQ(g_fetches, kAttempts);
  EXPECT_EQ(g_private, 1);
  EXPECT_EQ(src.View(0, 10, ViewRule::kAny), nullptr);
}

TEST_F(MemberSourceTest, AStaleReadIsMadeAgainOnAFreshSourceThenIsEio) {
  const uint32_t entry = Get()->ns.Lookup("m/raw.bin");
  ASSERT_NE(entry, meta::kNoEntry);
  int attempts = 0;
  EXPECT_EQ(WithSource(entry,
                       [&](const MemberSource& src) {
                         EXPECT_EQ(src.kind(), MemberSource::Kind::kBlob);
                         return ++attempts < 3 ? kStale : 42L;
                       }),
            42);
  EXPECT_EQ(attempts, 3);
  attempts = 0;
  EXPECT_EQ(WithSource(entry,
                       [&](const MemberSource&) {
                         ++attempts;
                         return kStale;
                       }),
            -EIO);
  EXPECT_EQ(attempts, kAttempts);
}

// A read whose copy would alias (base/copy_alias.h: the buffer 1-31 bytes past the member's
// offset modulo 4 KiB, as a large malloc'd buffer is past a page-aligned member) is staged a
// piece at a time and comes out the same; other reads are copied directly. The count of
// staged copies says which way each went.
TEST_F(MemberSourceTest, ReadsThatWouldAliasAreStagedAndComeOutTheSame) {
  const std::string blob = Pattern(700000);
  const int fd = MemFd(blob);
  const MemberSource src = MemberSource::Blob(fd, 4096, 0, 0);  // a member starting on a page
  std::vector<uint8_t> mem(600000 + 2 * base::kAliasPage);
  const auto page = (reinterpret_cast<uintptr_t>(mem.data()) + 4095) & ~uintptr_t{4095};
  const auto staged = [] { return SnapshotIoStats().realigned; };
  const auto read = [&](uint64_t dst_off, uint64_t off, size_t n) {
    auto* dst = reinterpret_cast<uint8_t*>(page + dst_off);
    std::fill(mem.begin(), mem.end(), uint8_t{0});
    EXPECT_EQ(src.Read(off, n, dst), static_cast<long>(n));
    EXPECT_EQ(std::string(reinterpret_cast<char*>(dst), n), blob.substr(4096 + off, n));
    EXPECT_EQ(dst[n], 0);  // nothing written past the read
  };
  const uint64_t before = staged();
  read(16, 0, 300000);  // over three pieces of the staging area
  read(31, 8192 + 5, 200000);
  const uint64_t after = staged();
#if defined(__x86_64__)
  EXPECT_EQ(after - before, 2u);  // (one count per read)
#else
  EXPECT_EQ(after, before);
#endif
  read(0, 0, 300000);          // on the page, as the member: direct
  read(32, 0, 300000);         // 32 past: direct
  read(16, 0, 1000);           // too short to be worth staging
  read(16 + 100, 100, 50000);  // the same distance from another offset: staged
  const bool x86 = base::CopyAliases(reinterpret_cast<void*>(page + 116), 4096 + 100, 50000);
  EXPECT_EQ(staged() - after, x86 ? 1u : 0u);
  // the blob ends early: EIO, also when staged (its bytes 16 past the page offset of 654096)
  const uint64_t end = staged();
  EXPECT_EQ(src.Read(650000, 60000, reinterpret_cast<uint8_t*>(page + (654096 + 16) % 4096)), -EIO);
  EXPECT_EQ(staged() - end, x86 ? 1u : 0u);  // (the short piece it got)
  ::close(fd);
}

TEST_F(MemberSourceTest, ArenaCopiesThatWouldAliasAreStagedAndComeOutTheSame) {
  std::vector<uint8_t> arena(300000 + base::kAliasPage), out(300000 + 2 * base::kAliasPage);
  const std::string bytes = Pattern(250000);
  auto* at = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(arena.data()) + 4095) &
                                        ~uintptr_t{4095});
  std::copy(bytes.begin(), bytes.end(), at);
  const MemberSource src = MemberSource::Arena(at, 7, 3);
  auto* dst = reinterpret_cast<uint8_t*>(
      ((reinterpret_cast<uintptr_t>(out.data()) + 4095) & ~uintptr_t{4095}) + 24);
  const uint64_t before = SnapshotIoStats().realigned;
  ASSERT_EQ(src.Read(0, bytes.size(), dst), static_cast<long>(bytes.size()));
  EXPECT_EQ(std::string(reinterpret_cast<char*>(dst), bytes.size()), bytes);
  EXPECT_EQ(SnapshotIoStats().realigned - before,
            base::CopyAliases(dst, 0, bytes.size()) ? 1u : 0u);
}

}  // namespace
}  // namespace fanstore::runtime
