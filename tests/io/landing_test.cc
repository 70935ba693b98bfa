// The landing map (io/landing.h) and the copy that fills it (io/stage.h StageLanding): the
// map records its chunk size, a want wakes the copier once, and the copy lands byte-exact,
// in huge pages where the kernel makes them, taking a chunk a reader waits for before its
// sequential stream reaches it, unless the copy is about to end: fetched into DATA's page
// cache first (where DATA keeps pages, as here) or landed in the copy; and the copy made
// before the command starts (StagePartition); a share checked where it landed
// (CheckMembersRead); the copy's own handles on DATA (OpenAgain, OpenAside).
#include "io/landing.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/map_aligned.h"
#include "io/stage.h"
#include "io/stage_parts.h"
#include "meta/format.h"
#include "meta/manifest.h"
#include "meta/pack.h"
#include "meta/partition_reader.h"
#include "tests/testutil.h"

namespace fanstore::io {
namespace {

constexpr uint64_t kMiB = 1 << 20;

TEST(LandingMap, RecordsItsChunkSizeForEveryReader) {
  testing::TempDir d("/dev/shm");  // (the map and tmpfs copies live there)
  ASSERT_FALSE(d.path().empty());
  auto made = LandingMap::Create(d.path() + "/landing", {5 * kMiB, 0, 2 * kMiB}, 2 * kMiB);
  ASSERT_TRUE(made.ok()) << made.status().message();
  EXPECT_EQ(made->chunk_bytes(), 2 * kMiB);
  EXPECT_EQ(made->chunks(0), 3u);
  EXPECT_EQ(made->chunks(1), 0u);
  EXPECT_EQ(made->chunks(2), 1u);
  LandingMap seen = LandingMap::Attach(d.path() + "/landing");
  ASSERT_TRUE(seen.valid());
  EXPECT_EQ(seen.chunk_bytes(), 2 * kMiB);
  // A range of partition 0 spans chunks by the recorded size: [1.5 MiB, 2.5 MiB) is 0 and 1.
  made->Land(0, 0);
  EXPECT_FALSE(seen.RangeLanded(0, 3 * kMiB / 2, kMiB));
  made->Land(0, 1);
  EXPECT_TRUE(seen.RangeLanded(0, 3 * kMiB / 2, kMiB));
  seen.Close();
  made->Close();
  EXPECT_FALSE(LandingMap::Create(d.path() + "/odd", {kMiB}, 3 * kMiB).ok());
}

TEST(LandingMap, AMapWithoutAValidChunkSizeIsNotAttached) {
  testing::TempDir d("/dev/shm");  // (the map and tmpfs copies live there)
  ASSERT_FALSE(d.path().empty());
  const std::string path = d.path() + "/landing";
  auto made = LandingMap::Create(path, {4 * kMiB});
  ASSERT_TRUE(made.ok());
  made->Close();
  std::string bytes = testing::ReadFile(path);
  const uint64_t bad = 3 * kMiB;  // (word 3: not a power of two)
  bytes.replace(24, 8, reinterpret_cast<const char*>(&bad), 8);
  testing::WriteFile(path, bytes);
  EXPECT_FALSE(LandingMap::Attach(path).valid());
}

TEST(LandingMap, AWantWakesTheCopierOnceAndOnlyForChunksNotLanded) {
  testing::TempDir d("/dev/shm");  // (the map and tmpfs copies live there)
  ASSERT_FALSE(d.path().empty());
  auto m = LandingMap::Create(d.path() + "/landing", {8 * kMiB}, 2 * kMiB);
  ASSERT_TRUE(m.ok());
  const uint32_t before = m->WantCount();
  m->Land(0, 1);
  m->Want(0, 2 * kMiB, 100);  // chunk 1: landed, nothing to ask
  EXPECT_EQ(m->WantCount(), before);
  m->Want(0, 6 * kMiB + 10, 100);  // chunk 3
  EXPECT_EQ(m->WantCount(), before + 1);
  m->Want(0, 6 * kMiB, 4096);  // chunk 3 again: no news
  EXPECT_EQ(m->WantCount(), before + 1);
  EXPECT_EQ(m->NextWanted(0, {}), 3);
  EXPECT_EQ(m->NextWanted(0, {uint64_t{1} << 3}), -1);  // (issued to a stream already)
  EXPECT_EQ(m->NextWanted(0, {}, 3), 3);
  EXPECT_EQ(m->NextWanted(0, {}, 4), -1);  // (none from chunk 4 on)
  // A sleeper on the count is woken by the next want. (Its timeout, an hour, is past the
  // test's: a want that woke nobody fails the test by its timeout.)
  const uint32_t seen = m->WantCount();
  std::thread wanter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    m->Want(0, 0, 1);
  });
  m->WaitForWant(seen, 3600'000'000'000);
  EXPECT_NE(m->WantCount(), seen);
  wanter.join();
}

// A reader's patience runs out only while nothing lands: landing in any partition starts it
// again (the clock is the test's own numbers).
TEST(LandingPatience, LastsWhileTheCopyLandsAnythingAndEndsOnAStuckOne) {
  testing::TempDir d("/dev/shm");
  ASSERT_FALSE(d.path().empty());
  auto m = LandingMap::Create(d.path() + "/landing", {8 * kMiB, 8 * kMiB}, 2 * kMiB);
  ASSERT_TRUE(m.ok());
  LandingPatience patience(m->Progress(), 1000, 100);
  EXPECT_FALSE(patience.Expired(1060, m->Progress()));
  EXPECT_EQ(patience.Left(1060), 40);
  m->Land(1, 2);  // (another partition's chunk: the copier is alive)
  EXPECT_FALSE(patience.Expired(1090, m->Progress()));
  EXPECT_FALSE(patience.Expired(1150, m->Progress()));  // (past the first 100, 60 after landing)
  m->Land(0, 0);
  EXPECT_FALSE(patience.Expired(1180, m->Progress()));
  EXPECT_EQ(patience.Left(1200), 80);
  EXPECT_TRUE(patience.Expired(1280, m->Progress()));  // (nothing landed for 100)
  EXPECT_TRUE(patience.Expired(1400, m->Progress()));
  m->SetState(0, LandingState::kFailed);  // (a copy's end is news too)
  EXPECT_FALSE(patience.Expired(1410, m->Progress()));
  LandingPatience later(m->Progress(), 2000, 100);  // (what moved before it began is no news)
  EXPECT_TRUE(later.Expired(2100, m->Progress()));
}

class LandingCopies : public ::testing::TestWithParam<bool> {};  // (copy_first)

// `files` raw members of 1 MiB packed in one partition under `t`: its blob and manifest.
void PackRawMiBs(const testing::TempDir& t, int files, std::string* src,
                 std::optional<meta::Manifest>* manifest) {
  for (int i = 0; i < files; ++i)
    testing::WriteFile(t.path() + "/src/f" + std::to_string(i),
                       testing::RandomBytes(kMiB, static_cast<uint32_t>(i)));
  meta::PackOptions o;
  o.src = t.path() + "/src";
  o.out = t.path() + "/packed";
  o.partitions = 1;
  o.compress = *meta::CompressMode::Parse("none");
  o.warn = [](const std::string&) {};
  ASSERT_TRUE(meta::Pack(o).ok());
  auto loaded = meta::Manifest::Load(o.out);
  ASSERT_TRUE(loaded.ok());
  manifest->emplace(std::move(*loaded));
  *src = o.out + "/" + meta::PartitionFileName(0);
}

// One partition of 24 x 1 MiB raw members (12+ chunks, copied by one sequential stream at
// one chunk per 30 ms) copied while a reader asks for its last chunk, once `after` chunks
// have landed. The chunks landed when the wanted one had, and the copy's result.
struct WantedRun {
  uint64_t chunks = 0, landed_when_wanted_arrived = 0;
  StageResult result;
};
void CopyWantingTheLastChunk(bool copy_first, int64_t in_order_ns, uint64_t after, WantedRun* run) {
  testing::TempDir t;
  testing::TempDir d("/dev/shm");  // (the map and tmpfs copies live there)
  ASSERT_FALSE(d.path().empty());
  std::string src;
  std::optional<meta::Manifest> manifest;
  ASSERT_NO_FATAL_FAILURE(PackRawMiBs(t, 24, &src, &manifest));
  const std::string dst = d.path() + "/" + meta::PartitionFileName(0);
  auto map = LandingMap::Create(d.path() + "/landing", {manifest->partitions[0].file_size});
  ASSERT_TRUE(map.ok());
  const uint64_t chunks = run->chunks = map->chunks(0);
  ASSERT_GE(chunks, 12u);

  std::atomic<uint64_t> landed_when_wanted_arrived{~uint64_t{0}};
  std::thread reader([&] {
    // (a copy that stopped lands nothing more: the test then fails below, never hangs)
    auto landed = [&] {
      uint64_t n = 0;
      for (uint64_t c = 0; c < chunks; ++c) n += map->Landed(0, c);
      return n;
    };
    while (map->State(0) != LandingState::kFailed && (!map->Copying() || landed() < after))
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    map->Want(0, (chunks - 1) * map->chunk_bytes(), 1);
    while (!map->Landed(0, chunks - 1) && map->State(0) != LandingState::kFailed)
      map->Wait(0, map->Count(0), 5'000'000);
    landed_when_wanted_arrived = landed();
  });
  LandingOptions opt;
  opt.chunk_delay_ms = 30;
  opt.copy_first = copy_first;
  opt.in_order_ns = in_order_ns;
  const Status st =
      StageLanding({{0, src, dst}}, *manifest, &*map, opt, nullptr,
                   [&](const LandingCopy&, const StageResult& r) { run->result = r; });
  reader.join();
  ASSERT_TRUE(st.ok()) << st.message();
  run->landed_when_wanted_arrived = landed_when_wanted_arrived.load();
  EXPECT_EQ(map->FromData(), !copy_first) << "where landed chunks are read";
  EXPECT_EQ(map->State(0), LandingState::kDone);
  EXPECT_EQ(testing::ReadFile(dst), testing::ReadFile(src));
  EXPECT_EQ(run->result.bytes, manifest->partitions[0].file_size);
}

// The copy far from its end (in_order_ns 0): the wanted chunk is taken at once, not when the
// sequential stream would reach it, last.
TEST_P(LandingCopies, TakesAWantedChunkAtOnceAndLandsByteExact) {
  WantedRun run;
  ASSERT_NO_FATAL_FAILURE(CopyWantingTheLastChunk(GetParam(), 0, 0, &run));
  EXPECT_LT(run.landed_when_wanted_arrived, run.chunks / 2)
      << "the wanted chunk waited for the sequential stream";
  if (ShmemCollapseError().empty())
    EXPECT_TRUE(run.result.huge_pages) << run.result.small_pages_why;
  else
    EXPECT_FALSE(run.result.small_pages_why.empty());  // (said, not silently small)
}

// The copy expected to end within in_order_ns (an hour here; two chunks landed, so the pace
// is known): the wanted chunk is left to the stream, which lands every chunk in order.
TEST_P(LandingCopies, LeavesAWantedChunkToTheStreamNearTheEnd) {
  WantedRun run;
  ASSERT_NO_FATAL_FAILURE(CopyWantingTheLastChunk(GetParam(), 3'600'000'000'000, 2, &run));
  EXPECT_EQ(run.landed_when_wanted_arrived, run.chunks)
      << "the wanted chunk was taken out of order";
}

// A copy made before the command starts (several nodes): byte-exact on tmpfs, in huge pages
// where the kernel makes them (made before the copy is written); a member damaged in DATA
// stops it, named, with nothing left where the copy would be.
TEST(StagePartition, CopiesByteExactInHugePagesAndRefusesADamagedMember) {
  testing::TempDir t;
  testing::TempDir d("/dev/shm");
  ASSERT_FALSE(d.path().empty());
  std::string src;
  std::optional<meta::Manifest> manifest;
  ASSERT_NO_FATAL_FAILURE(PackRawMiBs(t, 8, &src, &manifest));
  const std::string dst = d.path() + "/" + meta::PartitionFileName(0);
  auto r = StagePartition(src, dst, *manifest, 0);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(testing::ReadFile(dst), testing::ReadFile(src));
  EXPECT_EQ(r->bytes, manifest->partitions[0].file_size);
  if (ShmemCollapseError().empty())
    EXPECT_TRUE(r->huge_pages) << r->small_pages_why;
  else
    EXPECT_FALSE(r->small_pages_why.empty());
  ASSERT_EQ(::unlink(dst.c_str()), 0);

  std::string bytes = testing::ReadFile(src);
  bytes[bytes.size() / 2] ^= 0x20;  // (inside a member: 8 MiB of data, a small index)
  testing::WriteFile(src, bytes);
  auto bad = StagePartition(src, dst, *manifest, 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("checksum mismatch"), std::string::npos)
      << bad.status().message();
  EXPECT_NE(::access(dst.c_str(), F_OK), 0);
  EXPECT_NE(::access((dst + ".staging").c_str(), F_OK), 0);
}

// A share read before the command starts and checked where it landed (several nodes on a
// shared file system): every member of a whole partition passes, by one thread or four,
// and a member damaged in the blob is named, whichever thread reads it; so is a blob that
// cannot be opened.
TEST(CheckMembersRead, PassesAWholePartitionAndNamesADamagedMember) {
  testing::TempDir t;
  std::string src;
  std::optional<meta::Manifest> manifest;
  ASSERT_NO_FATAL_FAILURE(PackRawMiBs(t, 8, &src, &manifest));
  meta::PartitionReader r;
  ASSERT_TRUE(r.Open(src).ok());
  for (int threads : {1, 4}) {
    const Status st = CheckMembersRead(r, src, threads);
    EXPECT_TRUE(st.ok()) << threads << " threads: " << st.message();
  }
  std::string bytes = testing::ReadFile(src);
  bytes[bytes.size() / 2] ^= 0x20;  // (inside a member: 8 MiB of data, a small index)
  testing::WriteFile(src, bytes);
  for (int threads : {1, 4}) {
    const Status st = CheckMembersRead(r, src, threads);
    ASSERT_FALSE(st.ok()) << threads << " threads";
    EXPECT_EQ(st.message().rfind(src + ": member '", 0), 0u) << st.message();
    EXPECT_NE(st.message().find("checksum mismatch (damaged data"), std::string::npos)
        << st.message();
  }
  const Status gone = CheckMembersRead(r, t.path() + "/nowhere", 2);
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.message().find("/nowhere"), std::string::npos) << gone.message();
}

// The pages of `fd`'s first `len` bytes in the page cache.
size_t CachedPages(int fd, size_t len) {
  void* m = ::mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) return 0;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> v((len + page - 1) / page);
  size_t n = 0;
  if (::mincore(m, len, v.data()) == 0)
    for (unsigned char b : v) n += b & 1;
  ::munmap(m, len);
  return n;
}

// A fetch leaves the range in the page cache, whether spliced to /dev/null or (a sink that
// cannot take a splice: a file opened O_APPEND) read through the buffer; a range past the end
// of the file is an error naming it.
TEST(FetchAt, LeavesTheRangeCachedWithOrWithoutSplice) {
  testing::TempDir t;
  const std::string path = t.path() + "/blob";
  testing::WriteFile(path, testing::RandomBytes(4 * kMiB, 7));
  const int in = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(in, 0);
  const int null_sink = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  const int append_sink = ::open((t.path() + "/sink").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  ASSERT_GE(null_sink, 0);
  ASSERT_GE(append_sink, 0);
  std::vector<uint8_t> buf(3 * kMiB);
  const size_t pages = 4 * kMiB / static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  for (int sink : {null_sink, append_sink, -1}) {
    ::fdatasync(in);
    ::posix_fadvise(in, 0, 0, POSIX_FADV_DONTNEED);
    if (CachedPages(in, 4 * kMiB) != 0)
      GTEST_SKIP() << "the page cache of " << path << " cannot be dropped here";
    const Status st = FetchAt(in, sink, buf.data(), kMiB, 3 * kMiB, path);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_GE(CachedPages(in, 4 * kMiB), pages * 3 / 4) << "sink " << sink;
  }
  EXPECT_EQ(::lseek(append_sink, 0, SEEK_END), 0) << "the fallback wrote to the sink";
  const Status past = FetchAt(in, null_sink, buf.data(), 3 * kMiB, 2 * kMiB, path);
  EXPECT_NE(past.message().find(path + ": shorter than expected"), std::string::npos)
      << past.message();
  ::close(in);
  ::close(null_sink);
  ::close(append_sink);
}

// The copy's second handle on a partition: the same file through an open file description of
// its own (its offset moves alone: a FUSE client tells handles apart by it), and the file the
// first handle reads, not another renamed over its path since (a repack under the job).
TEST(OpenAgain, IsTheSameFileThroughAHandleOfItsOwn) {
  testing::TempDir t;
  const std::string path = t.path() + "/blob";
  testing::WriteFile(path, testing::RandomBytes(8192, 3));
  const int in = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(in, 0);
  auto same_file = [](int a, int b) {
    struct stat x, y;
    return ::fstat(a, &x) == 0 && ::fstat(b, &y) == 0 && x.st_dev == y.st_dev &&
           x.st_ino == y.st_ino;
  };
  ASSERT_EQ(::lseek(in, 100, SEEK_SET), 100);
  const int again = OpenAgain(in, path);
  ASSERT_GE(again, 0);
  EXPECT_NE(again, in);
  EXPECT_TRUE(same_file(in, again));
  EXPECT_EQ(::lseek(again, 0, SEEK_CUR), 0) << "a duplicate, sharing the first handle's offset";
  EXPECT_TRUE(::fcntl(again, F_GETFD) & FD_CLOEXEC);
  ::close(again);

  testing::WriteFile(t.path() + "/repacked", testing::RandomBytes(8192, 4));
  ASSERT_EQ(::rename((t.path() + "/repacked").c_str(), path.c_str()), 0);
  const int kept = OpenAgain(in, path);
  ASSERT_GE(kept, 0);
  EXPECT_TRUE(same_file(in, kept)) << "a handle on the file renamed over the path";
  EXPECT_TRUE(::fcntl(kept, F_GETFD) & FD_CLOEXEC);
  ::close(kept);
  ASSERT_EQ(::unlink(path.c_str()), 0);
  const int gone = OpenAgain(in, path);
  EXPECT_TRUE(gone >= 0 && same_file(in, gone)) << "no handle once the path is gone";
  if (gone >= 0) ::close(gone);
  ::close(in);
}

// The handle for chunks out of order: a description of its own on the same file (its offset
// apart from the stream's), close-on-exec; none once the path names another file, so that
// the stream's handle is read rather than the wrong file's.
TEST(OpenAside, IsTheSameFileOrNone) {
  testing::TempDir t;
  const std::string path = t.path() + "/blob";
  testing::WriteFile(path, testing::RandomBytes(8192, 5));
  const int in = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(in, 0);
  ASSERT_EQ(::lseek(in, 100, SEEK_SET), 100);
  const int aside = OpenAside(in, path);
  ASSERT_GE(aside, 0);
  struct stat x, y;
  ASSERT_EQ(::fstat(in, &x), 0);
  ASSERT_EQ(::fstat(aside, &y), 0);
  EXPECT_TRUE(x.st_dev == y.st_dev && x.st_ino == y.st_ino);
  EXPECT_EQ(::lseek(aside, 0, SEEK_CUR), 0) << "a duplicate, sharing the stream's offset";
  EXPECT_TRUE(::fcntl(aside, F_GETFD) & FD_CLOEXEC);
  ::close(aside);
  testing::WriteFile(t.path() + "/repacked", testing::RandomBytes(8192, 6));
  ASSERT_EQ(::rename((t.path() + "/repacked").c_str(), path.c_str()), 0);
  EXPECT_EQ(OpenAside(in, path), -1);
  ASSERT_EQ(::unlink(path.c_str()), 0);
  EXPECT_EQ(OpenAside(in, path), -1);
  ::close(in);
}

INSTANTIATE_TEST_SUITE_P(Modes, LandingCopies, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? "LandedInTheCopy" : "FetchedThenCopied";
                         });

}  // namespace
}  // namespace fanstore::io
