// Round-trip, determinism and bad-input tests of the packer against real trees on disk.
#include "meta/pack.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "meta/blocks.h"
#include "meta/dataset.h"
#include "tests/testutil.h"

namespace fanstore::meta {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// A tree with the edge cases the format must carry.
void MakeEdgeTree(const std::string& root) {
  testing::WriteFile(root + "/empty.bin", "");
  testing::WriteFile(root + "/one.bin", "x");
  testing::WriteFile(root + "/r4095.bin", testing::RandomBytes(4095, 1));
  testing::WriteFile(root + "/r4096.bin", testing::RandomBytes(4096, 2));
  testing::WriteFile(root + "/r4097.bin", testing::RandomBytes(4097, 3));
  testing::WriteFile(root + "/text4097.txt", testing::TextBytes(4097));
  testing::WriteFile(root + "/multi/mb_random.bin", testing::RandomBytes(3 << 20, 4));
  testing::WriteFile(root + "/multi/mb_text.txt", testing::TextBytes(9 << 20));  // streamed
  testing::WriteFile(root + "/multi/mb_random_big.bin", testing::RandomBytes(9 << 20, 5));
  testing::WriteFile(root + "/photo.jpg", "\xff\xd8\xff\xe0" + testing::TextBytes(50000));
  testing::WriteFile(root + "/train/c0/a.txt", testing::TextBytes(1000));
  testing::WriteFile(root + "/train/c1/b.txt", testing::TextBytes(2000));
  testing::WriteFile(root + "/val/v1.txt", "validation");
  testing::WriteFile(root + "/val/deep/v2.txt", "validation two");
  testing::WriteFile(root + "/name with spaces.txt", "spaces");
  testing::WriteFile(root + "/new\nline.txt", "newline");
  testing::WriteFile(root + "/latin1-\xe9\xff.txt", "not utf-8");
  fs::create_directories(root + "/empty_dir");
  fs::create_directories(root + "/val/empty_val_dir");
  fs::create_symlink("one.bin", root + "/link_to_file");
  fs::create_symlink("train", root + "/link_to_dir");
  fs::create_symlink("/nonexistent/target", root + "/dangling");
  ::chmod((root + "/one.bin").c_str(), 0600);
  ::chmod((root + "/train/c0").c_str(), 0750);
  struct timespec ts[2] = {{1000000, 123456789}, {1000000, 123456789}};
  ::utimensat(AT_FDCWD, (root + "/r4095.bin").c_str(), ts, 0);
}

PackOptions Options(const std::string& src, const std::string& out) {
  PackOptions o;
  o.src = src;
  o.out = out;
  o.partitions = 3;
  o.broadcast = {"val/**"};
  o.threads = 2;
  o.warn = [](const std::string&) {};
  return o;
}

std::string ReadMember(const Dataset& ds, const std::string& path) {
  const MemberRef* r = ds.Lookup(path);
  EXPECT_NE(r, nullptr) << path;
  if (!r) return {};
  std::string out;
  const Status s = ds.ReadMember(*r, [&](std::span<const uint8_t> b) {
    out.append(reinterpret_cast<const char*>(b.data()), b.size());
    return true;
  });
  EXPECT_TRUE(s.ok()) << s.message();
  return out;
}

// Every entry of the source tree is in the dataset with the same metadata and bytes, and
// the dataset has nothing else.
void ExpectSameAsSource(const std::string& src, const Dataset& ds) {
  for (auto& e : fs::recursive_directory_iterator(src)) {              // does not follow symlinks
    const std::string rel = e.path().string().substr(src.size() + 1);  // no symlink resolution
    struct stat st;
    ASSERT_EQ(::lstat(e.path().c_str(), &st), 0);
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode)) continue;
    const MemberRef* r = ds.Lookup(rel);
    ASSERT_NE(r, nullptr) << rel;
    const MemberView v = ds.View(*r);
    EXPECT_EQ(v.rec.mode, st.st_mode) << rel;
    EXPECT_EQ(v.rec.uid, st.st_uid) << rel;
    EXPECT_EQ(v.rec.gid, st.st_gid) << rel;
    EXPECT_EQ(v.rec.size, static_cast<uint64_t>(st.st_size)) << rel;
    EXPECT_EQ(v.rec.mtime_ns, st.st_mtim.tv_sec * 1000000000ll + st.st_mtim.tv_nsec) << rel;
    if (S_ISREG(st.st_mode)) {
      EXPECT_EQ(ReadMember(ds, rel), testing::ReadFile(e.path())) << rel;
    } else if (S_ISLNK(st.st_mode)) {
      EXPECT_EQ(std::string(v.target), fs::read_symlink(e.path()).string()) << rel;
      EXPECT_EQ(ReadMember(ds, rel), fs::read_symlink(e.path()).string()) << rel;
    }
  }
}

// Lists the source (recursively, no symlink following) as sorted relative paths.
std::vector<std::string> SourcePaths(const std::string& src) {
  std::vector<std::string> v;
  for (auto& e : fs::recursive_directory_iterator(src)) {
    struct stat st;
    ::lstat(e.path().c_str(), &st);
    if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode) || S_ISLNK(st.st_mode))
      v.push_back(e.path().string().substr(src.size() + 1));
  }
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<std::string> DatasetPaths(const Dataset& ds, std::string_view dir = "") {
  std::vector<std::string> v;
  for (const MemberRef& r : ds.Children(dir)) {
    const MemberView m = ds.View(r);
    v.emplace_back(m.path);
    if (m.kind() == Kind::kDir) {
      auto sub = DatasetPaths(ds, m.path);
      v.insert(v.end(), sub.begin(), sub.end());
    }
  }
  if (dir.empty()) std::sort(v.begin(), v.end());
  return v;
}

class PackRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(PackRoundTrip, EveryMemberComesBackIdentical) {
  TempDir t;
  MakeEdgeTree(t / "src");
  PackOptions o = Options(t / "src", t / "out");
  o.compress = *CompressMode::Parse(GetParam());
  auto stats = Pack(o);
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  EXPECT_EQ(stats->partitions, 4u);  // 3 sharded + 1 broadcast
  auto ds = Dataset::Open(t / "out");
  ASSERT_TRUE(ds.ok()) << ds.status().message();
  ExpectSameAsSource(t / "src", **ds);
  EXPECT_EQ(DatasetPaths(**ds), SourcePaths(t / "src"));
  const MemberView root = (*ds)->View(*(*ds)->Lookup(""));
  struct stat st;
  ::stat((t / "src").c_str(), &st);
  EXPECT_EQ(root.rec.mode, st.st_mode);
  EXPECT_EQ((*ds)->manifest().source, fs::canonical(t / "src").string());
}

// Raw members of a block or more start on a block boundary (mmap maps them from the blob);
// smaller ones are packed tight, right after the data before them.
TEST_P(PackRoundTrip, RawMembersOfABlockAreAlignedAndSmallerOnesTight) {
  TempDir t;
  MakeEdgeTree(t / "src");
  for (int i = 1; i <= 20; ++i)
    testing::WriteFile(fs::path(t / "src/tiny") / std::to_string(i),
                       testing::RandomBytes(i * 50, i));
  PackOptions o = Options(t / "src", t / "out");
  o.compress = *CompressMode::Parse(GetParam());
  ASSERT_TRUE(Pack(o).ok());
  auto ds = Dataset::Open(t / "out");
  ASSERT_TRUE(ds.ok());
  size_t small = 0, tight = 0;
  for (const auto& p : (*ds)->partitions()) {
    std::map<uint64_t, MemberView> by_offset;  // data order
    for (size_t i = 0; i < p.size(); ++i) {
      const MemberView v = p.member(i);
      if (v.kind() == Kind::kFile && v.rec.stored_size > 0) by_offset.emplace(v.rec.data_offset, v);
    }
    uint64_t end_of_previous = kDataStart;
    for (const auto& [offset, v] : by_offset) {
      if (StoredRaw(v.codec()) && v.rec.size >= kBlockAlign) {
        EXPECT_EQ(offset % kBlockAlign, 0u) << v.path;
      } else if (v.codec() == Codec::kRaw) {
        ++small;
        if (offset == end_of_previous) ++tight;
      }
      end_of_previous = offset + v.rec.stored_size;
    }
  }
  EXPECT_GE(small, 20u);  // the random tiny/N at least
  EXPECT_EQ(tight, small);
  ExpectSameAsSource(t / "src", **ds);
}

INSTANTIATE_TEST_SUITE_P(Modes, PackRoundTrip, ::testing::Values("none", "auto", "1", "3"));

TEST(Pack, AutoKeepsJpegAndRandomRawAndDeflatesText) {
  TempDir t;
  MakeEdgeTree(t / "src");
  testing::WriteFile(t / "src/multi/mb_text.npy", testing::TextBytes(9 << 20));
  ASSERT_TRUE(Pack(Options(t / "src", t / "out")).ok());
  auto ds = Dataset::Open(t / "out");
  ASSERT_TRUE(ds.ok());
  auto codec = [&](const char* p) { return (*ds)->View(*(*ds)->Lookup(p)).codec(); };
  EXPECT_EQ(codec("photo.jpg"), Codec::kRaw);  // JPEG magic: not even tried
  EXPECT_EQ(codec("r4096.bin"), Codec::kRaw);  // does not compress
  // (over 8 MiB: raw with a checksum per block)
  EXPECT_EQ(codec("multi/mb_random_big.bin"), Codec::kRawBlocks);
  EXPECT_EQ(codec("text4097.txt"), Codec::kDeflate);
  // Over 8 MiB: deflated in blocks if the name says text (read, not mapped), else kept
  // raw (a mapped compressed member is inflated whole in every process that maps it).
  EXPECT_EQ(codec("multi/mb_text.txt"), Codec::kDeflateBlocks);
  EXPECT_EQ(codec("multi/mb_text.npy"), Codec::kRawBlocks);
}

TEST(Pack, TextNamesAreKnownByTheirExtension) {
  for (const char* p : {"a.txt", "d/x.CSV", "corpus/part-1.jsonl", "b.tsv", "c.json", "x.y.log"})
    EXPECT_TRUE(LooksLikeText(p)) << p;
  for (const char* p : {"a.npy", "txt", "d.txt/x", "a.h5", "data.mdb", "x.txt.gz", ".", ""})
    EXPECT_FALSE(LooksLikeText(p)) << p;
}

// The edge tree packed into t/out at level 1 (its 9 MiB text member block-deflated).
void PackEdgeTreeAtLevel1(const TempDir& t) {
  MakeEdgeTree(t / "src");
  PackOptions o = Options(t / "src", t / "out");
  o.compress = *CompressMode::Parse("1");
  ASSERT_TRUE(Pack(o).ok());
}

TEST(Pack, AnExplicitLevelDeflatesLargeMembersToo) {
  TempDir t;
  ASSERT_NO_FATAL_FAILURE(PackEdgeTreeAtLevel1(t));
  auto ds = Dataset::Open(t / "out");
  ASSERT_TRUE(ds.ok());
  const MemberView v = (*ds)->View(*(*ds)->Lookup("multi/mb_text.txt"));
  EXPECT_EQ(v.codec(), Codec::kDeflateBlocks);
  EXPECT_LT(v.rec.stored_size, v.rec.size / 2);
  // Members streamed whole are cut into 1 MiB blocks (a table at the end); smaller ones are
  // one stream.
  EXPECT_EQ((*ds)->View(*(*ds)->Lookup("multi/mb_random.bin")).codec(), Codec::kRaw);
  EXPECT_EQ((*ds)->View(*(*ds)->Lookup("text4097.txt")).codec(), Codec::kDeflate);
  ExpectSameAsSource(t / "src", **ds);
}

// The stored bytes of a block-deflated member: where block b's stream is, from its table.
BlockEntry BlockOf(const std::string& part, const IndexRecord& r, uint32_t b) {
  const std::string bytes = testing::ReadFile(part);
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data()) + r.data_offset;
  BlockTrailer t;
  EXPECT_TRUE(
      DecodeBlockTrailer(p + r.stored_size - kBlockTrailerBytes, r.size, r.stored_size, &t));
  EXPECT_EQ(t.count, BlockCount(r.size));
  BlockEntry e{};
  EXPECT_TRUE(DecodeBlockEntry(p + t.table_offset + b * kBlockEntryBytes, t, &e));
  return e;
}

TEST(Pack, ADamagedBlockIsNamedAndTheBlocksBeforeItAreDelivered) {
  TempDir t;
  ASSERT_NO_FATAL_FAILURE(PackEdgeTreeAtLevel1(t));
  std::string part;
  IndexRecord r;
  {
    auto ds = Dataset::Open(t / "out");
    ASSERT_TRUE(ds.ok());
    const MemberRef ref = *(*ds)->Lookup("multi/mb_text.txt");
    part = (*ds)->partitions()[ref.partition].name();
    r = (*ds)->View(ref).rec;
  }
  const BlockEntry e = BlockOf(part, r, 4);
  testing::FlipByte(part, r.data_offset + e.offset + e.length / 2);
  auto ds = Dataset::Open(t / "out");
  ASSERT_TRUE(ds.ok()) << ds.status().message();  // metadata intact: data is checked when read
  std::string got;
  const Status s =
      (*ds)->ReadMember(*(*ds)->Lookup("multi/mb_text.txt"), [&](std::span<const uint8_t> b) {
        got.append(reinterpret_cast<const char*>(b.data()), b.size());
        return true;
      });
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'multi/mb_text.txt'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("block 4"), std::string::npos) << s.message();
  EXPECT_EQ(got, testing::ReadFile(t / "src/multi/mb_text.txt").substr(0, 4u << 20));
  EXPECT_EQ(ReadMember(**ds, "multi/mb_random_big.bin"),
            testing::ReadFile(t / "src/multi/mb_random_big.bin"));
}

TEST(Pack, BroadcastMembersAreInTheBroadcastPartitionOnly) {
  TempDir t;
  MakeEdgeTree(t / "src");
  ASSERT_TRUE(Pack(Options(t / "src", t / "out")).ok());
  auto ds = Dataset::Open(t / "out");
  ASSERT_TRUE(ds.ok());
  const auto& parts = (*ds)->partitions();
  ASSERT_EQ(parts.back().header().flags, kFlagBroadcast);
  for (const char* p : {"val/v1.txt", "val/deep/v2.txt", "val/empty_val_dir"}) {
    const MemberRef* r = (*ds)->Lookup(p);
    ASSERT_NE(r, nullptr) << p;
    EXPECT_EQ(r->partition, parts.size() - 1) << p;
  }
  EXPECT_LT((*ds)->Lookup("train/c0/a.txt")->partition, parts.size() - 1);
}

// (With an explicit level the large members' blocks are deflated on every thread at once.)
class PackDeterminism : public ::testing::TestWithParam<const char*> {};

TEST_P(PackDeterminism, OutputIsByteIdenticalAcrossRunsAndThreadCounts) {
  TempDir t;
  MakeEdgeTree(t / "src");
  testing::WriteFile(t / "src/multi/mb_text_long.txt", testing::TextBytes(21 << 20));  // 3 chunks
  PackOptions a = Options(t / "src", t / "a");
  a.threads = 1;
  a.compress = *CompressMode::Parse(GetParam());
  PackOptions b = Options(t / "src", t / "b");
  b.threads = 4;
  b.compress = a.compress;
  ASSERT_TRUE(Pack(a).ok());
  ASSERT_TRUE(Pack(b).ok());
  std::vector<std::string> names;
  for (auto& e : fs::directory_iterator(t / "a")) names.push_back(e.path().filename());
  ASSERT_EQ(names.size(), 5u);  // manifest + 4 partitions
  for (const auto& n : names)
    EXPECT_EQ(testing::ReadFile(t / ("a/" + n)), testing::ReadFile(t / ("b/" + n))) << n;
  auto ds = Dataset::Open(t / "b");
  ASSERT_TRUE(ds.ok());
  ExpectSameAsSource(t / "src", **ds);
}
INSTANTIATE_TEST_SUITE_P(Modes, PackDeterminism, ::testing::Values("auto", "1", "3"));

// Makes `depth` nested directories named `comp` under `dir` (with openat, so the depth is
// not limited by PATH_MAX) and a 4-byte file "leaf.txt" in the last; returns the last
// directory's path relative to `dir`.
std::string MakeDeepTree(const std::string& dir, const std::string& comp, int depth) {
  fs::create_directories(dir);
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  std::string rel;
  for (int i = 0; i < depth && fd >= 0; ++i) {
    EXPECT_EQ(::mkdirat(fd, comp.c_str(), 0755), 0);
    const int next = ::openat(fd, comp.c_str(), O_RDONLY | O_DIRECTORY);
    ::close(fd);
    fd = next;
    rel += (rel.empty() ? "" : "/") + comp;
  }
  const int f = ::openat(fd, "leaf.txt", O_WRONLY | O_CREAT, 0644);
  EXPECT_EQ(::write(f, "deep", 4), 4);
  ::close(f);
  ::close(fd);
  return rel;
}

TEST(Pack, DeepPathsBeyondPathMaxArePacked) {
  TempDir t;
  const std::string rel = MakeDeepTree(t / "src", std::string(60, 'd'), 80);  // 80 * 61 bytes
  ASSERT_GT(rel.size(), static_cast<size_t>(PATH_MAX));
  auto st = Pack(Options(t / "src", t / "out"));
  ASSERT_TRUE(st.ok()) << st.status().message();
  auto ds = Dataset::Open(t / "out");
  ASSERT_TRUE(ds.ok());
  EXPECT_EQ(ReadMember(**ds, rel + "/leaf.txt"), "deep");
  // std::filesystem cannot remove a tree deeper than PATH_MAX; rm(1) walks it with openat.
  EXPECT_EQ(std::system(("rm -rf '" + t / "src" + "'").c_str()), 0);
}

TEST(Pack, SpecialFilesAreSkippedWithAWarning) {
  TempDir t;
  MakeEdgeTree(t / "src");
  ASSERT_EQ(::mkfifo((t / "src/a.fifo").c_str(), 0644), 0);
  std::vector<std::string> warnings;
  PackOptions o = Options(t / "src", t / "out");
  o.warn = [&](const std::string& w) { warnings.push_back(w); };
  auto st = Pack(o);
  ASSERT_TRUE(st.ok()) << st.status().message();
  EXPECT_EQ(st->skipped, 1u);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("a.fifo: skipped"), std::string::npos) << warnings[0];
  auto ds = Dataset::Open(t / "out");
  ASSERT_TRUE(ds.ok());
  EXPECT_EQ((*ds)->Lookup("a.fifo"), nullptr);
}

Status PackError(const PackOptions& o) {
  auto r = Pack(o);
  return r.ok() ? Status::Ok() : r.status();
}

TEST(PackBadInput, MissingSourceIsNamed) {
  TempDir t;
  const Status s = PackError(Options(t / "nope", t / "out"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), t / "nope" + ": No such file or directory");
  EXPECT_FALSE(fs::exists(t / "out"));
}

// Namespace images keep a path's length in 16 bits: a deeper path fails the pack with one
// short line naming it (cut), and no output is left, rather than a dataset that every
// start-up would refuse.
TEST(PackBadInput, APathOverTheFormatsLimitIsNamedAndLeavesNoOutput) {
  TempDir t;
  // 256 directories of 255 bytes: the last one's path is 65535 bytes, its leaf's longer.
  const std::string rel = MakeDeepTree(t / "src", std::string(255, 'd'), 256);
  ASSERT_EQ(rel.size(), kMaxPathBytes);
  const Status s = PackError(Options(t / "src", t / "out"));
  EXPECT_EQ(std::system(("rm -rf '" + t / "src" + "'").c_str()), 0);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("path longer than 65535 bytes inside the dataset"), std::string::npos)
      << s.message().substr(0, 300);
  EXPECT_EQ(s.message().rfind(t / "src/ddd", 0), 0u) << s.message().substr(0, 300);
  EXPECT_LT(s.message().size(), 400u);
  EXPECT_EQ(s.message().find('\n'), std::string::npos);
  EXPECT_FALSE(fs::exists(t / "out"));
}

TEST(PackBadInput, SourceThatIsAFileIsRejected) {
  TempDir t;
  testing::WriteFile(t / "f", "x");
  const Status s = PackError(Options(t / "f", t / "out"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not a directory"), std::string::npos);
}

TEST(PackBadInput, ExistingOutputNeedsForce) {
  TempDir t;
  MakeEdgeTree(t / "src");
  ASSERT_TRUE(Pack(Options(t / "src", t / "out")).ok());
  const std::string before = testing::ReadFile(t / "out/manifest");
  const Status s = PackError(Options(t / "src", t / "out"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("already exists (use --force"), std::string::npos);
  EXPECT_EQ(testing::ReadFile(t / "out/manifest"), before);
  PackOptions o = Options(t / "src", t / "out");
  o.force = true;
  o.partitions = 1;
  ASSERT_TRUE(Pack(o).ok());
  EXPECT_TRUE(Dataset::Open(t / "out").ok());
  EXPECT_FALSE(fs::exists(t / "out/part-00002.fsb"));  // old partitions gone
}

TEST(PackBadInput, ForceNeverReplacesANonDataset) {
  TempDir t;
  MakeEdgeTree(t / "src");
  testing::WriteFile(t / "precious/thesis.tex", "years of work");
  PackOptions o = Options(t / "src", t / "precious");
  o.force = true;
  const Status s = PackError(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not a FanStore dataset"), std::string::npos);
  EXPECT_EQ(testing::ReadFile(t / "precious/thesis.tex"), "years of work");
}

TEST(PackBadInput, OutputInsideSourceIsRejected) {
  TempDir t;
  MakeEdgeTree(t / "src");
  const Status s = PackError(Options(t / "src", t / "src/packed"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("inside the source"), std::string::npos);
}

TEST(PackBadInput, FileThatChangesSizeFailsThePackAndLeavesNoOutput) {
  TempDir t;
  MakeEdgeTree(t / "src");
  for (const char* victim : {"train/c0/a.txt", "multi/mb_text.txt"}) {
    PackOptions o = Options(t / "src", t / "out");
    o.on_scanned = [&](const PackProgress&) {
      std::ofstream(t / ("src/" + std::string(victim)), std::ios::app) << "more";
    };
    const Status s = PackError(o);
    ASSERT_FALSE(s.ok()) << victim;
    EXPECT_NE(s.message().find(std::string(victim) + ": file changed while packing"),
              std::string::npos)
        << s.message();
    EXPECT_FALSE(fs::exists(t / "out"));
    for (auto& e : fs::directory_iterator(t.path()))
      EXPECT_EQ(e.path().filename().string().find("out.fanstore-partial"), std::string::npos);
  }
}

TEST(PackBadInput, UnreadableFileIsNamedAndLeavesNoOutput) {
  TempDir t;
  MakeEdgeTree(t / "src");
  testing::WriteFile(t / "src/secret.txt", "s");
  ::chmod((t / "src/secret.txt").c_str(), 0);
  ::chmod((t / "src/train/c0").c_str(), 0755);  // only secret.txt is out of reach
  ::chmod((t / "src/one.bin").c_str(), 0644);
  ::chmod(t.path().c_str(), 0777);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Root reads everything: drop to an unprivileged user so the permission bits apply.
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) _exit(3);
    const Status s = PackError(Options(t / "src", t / "out"));
    const bool named = !s.ok() && s.message() == t / "src/secret.txt" + ": Permission denied";
    if (!named) std::fprintf(stderr, "child got: %s\n", s.message().c_str());
    _exit(named && !fs::exists(t / "out") ? 0 : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(ExpandSources, BraceRangesKeepTheirWidthAndGlobsAreSorted) {
  TempDir t;
  for (const char* n : {"s-2.tar", "s-10.tar", "s-1.tar"}) testing::WriteFile(t / n, "x");
  auto r = ExpandSources({"shard-{000008..000011}.tar", "plain.tar", t / "s-*.tar", "{a..c}"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  const std::vector<std::string> want = {"shard-000008.tar", "shard-000009.tar", "shard-000010.tar",
                                         "shard-000011.tar", "plain.tar",        t / "s-1.tar",
                                         t / "s-10.tar",     t / "s-2.tar",      "{a..c}"};
  EXPECT_EQ(*r, want);
  auto two = ExpandSources({"x{1..2}-{08..09}"});
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(*two, (std::vector<std::string>{"x1-08", "x1-09", "x2-08", "x2-09"}));
  auto none = ExpandSources({t / "nothing-*.tar"});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("matches no file"), std::string::npos);
  EXPECT_FALSE(ExpandSources({"s{5..1}"}).ok());
}

}  // namespace
}  // namespace fanstore::meta
