// Damage to a packed dataset is always a clear error naming the file (and member), never a
// crash or wrong bytes. Run under the asan preset by ci/test.sh.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "compress/crc32c.h"
#include "meta/dataset.h"
#include "meta/format.h"
#include "meta/pack.h"
#include "meta/partition_reader.h"
#include "meta/partition_writer.h"
#include "tests/testutil.h"

namespace fanstore::meta {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

class Corruption : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::WriteFile(t_ / "src/a/raw.bin", testing::RandomBytes(100000, 7));
    testing::WriteFile(t_ / "src/a/text.txt", testing::TextBytes(50000));
    testing::WriteFile(t_ / "src/b/small.txt", "hello");
    fs::create_symlink("a/raw.bin", t_ / "src/link");
    PackOptions o;
    o.src = t_ / "src";
    o.out = t_ / "out";
    o.partitions = 1;
    o.threads = 1;
    auto st = Pack(o);
    ASSERT_TRUE(st.ok()) << st.status().message();
    part_ = t_ / "out/part-00000.fsb";
    auto ds = Dataset::Open(t_ / "out");
    ASSERT_TRUE(ds.ok());
    const auto& r = (*ds)->partitions()[0];
    footer_ = r.footer();
    raw_ = r.member((*ds)->Lookup("a/raw.bin")->index).rec;
    text_ = r.member((*ds)->Lookup("a/text.txt")->index).rec;
    ASSERT_EQ(static_cast<Codec>(text_.codec), Codec::kDeflate);
  }

  Status OpenError() {
    auto ds = Dataset::Open(t_ / "out");
    return ds.ok() ? Status::Ok() : ds.status();
  }
  Status ReadError(const std::string& path) {
    auto ds = Dataset::Open(t_ / "out");
    if (!ds.ok()) return ds.status();
    return (*ds)->ReadMember(*(*ds)->Lookup(path), [](std::span<const uint8_t>) { return true; });
  }
  void ExpectOpenFailsNaming(const std::string& what) {
    const Status s = OpenError();
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find(what), std::string::npos) << s.message();
  }

  TempDir t_;
  std::string part_;
  PartitionFooter footer_;
  IndexRecord raw_, text_;
};

TEST_F(Corruption, FlippedByteInRawDataIsAChecksumErrorNamingTheMember) {
  testing::FlipByte(part_, raw_.data_offset + 5000);
  EXPECT_TRUE(OpenError().ok());  // metadata intact
  const Status s = ReadError("a/raw.bin");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), part_ + ": member 'a/raw.bin': checksum mismatch (damaged data)");
  EXPECT_TRUE(ReadError("b/small.txt").ok());  // the rest still reads
}

TEST_F(Corruption, FlippedByteInCompressedDataIsAnError) {
  for (uint64_t at : {uint64_t{0}, text_.stored_size / 2, text_.stored_size - 1}) {
    testing::FlipByte(part_, text_.data_offset + at);
    const Status s = ReadError("a/text.txt");
    ASSERT_FALSE(s.ok()) << at;
    EXPECT_NE(s.message().find("member 'a/text.txt'"), std::string::npos) << s.message();
    testing::FlipByte(part_, text_.data_offset + at);  // undo
    EXPECT_TRUE(ReadError("a/text.txt").ok());
  }
}

TEST_F(Corruption, EveryFlippedIndexOrStringByteIsDetected) {
  const uint64_t end = fs::file_size(part_);
  for (uint64_t at = footer_.index_offset; at < end; at += 7) {
    testing::FlipByte(part_, at);
    EXPECT_FALSE(OpenError().ok()) << "offset " << at;
    testing::FlipByte(part_, at);
  }
  EXPECT_TRUE(OpenError().ok());
}

TEST_F(Corruption, FlippedHeaderByteIsDetected) {
  testing::FlipByte(part_, 20);
  ExpectOpenFailsNaming(part_ + ": header checksum mismatch");
}

TEST_F(Corruption, WrongMagicIsNamed) {
  testing::FlipByte(part_, 0);
  ExpectOpenFailsNaming(part_ + ": not a FanStore partition");
}

TEST_F(Corruption, WrongVersionIsNamed) {
  uint8_t b[PartitionHeader::kSize];
  std::string bytes = testing::ReadFile(part_);
  PartitionHeader h;
  ASSERT_TRUE(PartitionHeader::DecodeFrom(reinterpret_cast<uint8_t*>(bytes.data()), &h).ok());
  h.version = 99;
  h.EncodeTo(b);
  bytes.replace(0, sizeof b, reinterpret_cast<char*>(b), sizeof b);
  testing::WriteFile(part_, bytes);
  ExpectOpenFailsNaming(part_ + ": unsupported format version 99");
}

// Format 1 aligned every raw member; this build writes format 3 (small raw members packed
// tight since 2, block-deflated members since 3) and still reads 1: the same partition
// (which has no block-deflated member) relabelled 1 opens and reads.
TEST_F(Corruption, AFormatOnePartitionIsStillRead) {
  std::string bytes = testing::ReadFile(part_);
  PartitionHeader h;
  ASSERT_TRUE(PartitionHeader::DecodeFrom(reinterpret_cast<uint8_t*>(bytes.data()), &h).ok());
  ASSERT_EQ(h.version, kFormatVersion);
  h.version = 1;
  uint8_t b[PartitionHeader::kSize];
  h.EncodeTo(b);
  bytes.replace(0, sizeof b, reinterpret_cast<char*>(b), sizeof b);
  const size_t at = bytes.size() - PartitionFooter::kSize;
  PartitionFooter f;
  ASSERT_TRUE(PartitionFooter::DecodeFrom(reinterpret_cast<uint8_t*>(bytes.data() + at), &f).ok());
  f.version = 1;
  uint8_t fb[PartitionFooter::kSize];
  f.EncodeTo(fb);
  bytes.replace(at, sizeof fb, reinterpret_cast<char*>(fb), sizeof fb);
  testing::WriteFile(part_, bytes);
  ASSERT_TRUE(OpenError().ok()) << OpenError().message();
  for (const char* m : {"a/raw.bin", "a/text.txt", "b/small.txt"})
    EXPECT_TRUE(ReadError(m).ok()) << m;
}

TEST_F(Corruption, TruncationAnywhereIsDetected) {
  const std::string whole = testing::ReadFile(part_);
  for (size_t keep : {size_t{0}, size_t{100}, size_t{4096}, whole.size() / 2, whole.size() - 1}) {
    testing::WriteFile(part_, whole.substr(0, keep));
    const Status s = OpenError();
    ASSERT_FALSE(s.ok()) << keep;
    EXPECT_EQ(s.message().rfind(part_ + ": ", 0), 0u) << s.message();
  }
}

TEST_F(Corruption, MissingPartitionIsNamed) {
  fs::remove(part_);
  ExpectOpenFailsNaming(part_ + ": No such file or directory");
}

TEST_F(Corruption, PartitionFromAnotherPackIsRejected) {
  testing::WriteFile(t_ / "src/b/extra.txt", "changes the dataset id");
  PackOptions o;
  o.src = t_ / "src";
  o.out = t_ / "other";
  o.partitions = 1;
  ASSERT_TRUE(Pack(o).ok());
  fs::copy_file(t_ / "other/part-00000.fsb", part_, fs::copy_options::overwrite_existing);
  ExpectOpenFailsNaming("another dataset");
}

TEST_F(Corruption, DamagedManifestIsNamed) {
  testing::FlipByte(t_ / "out/manifest", 30);
  ExpectOpenFailsNaming("manifest: checksum mismatch");
  fs::remove(t_ / "out/manifest");
  ExpectOpenFailsNaming(t_ / "out/manifest: No such file or directory");
}

TEST_F(Corruption, ASourceTreeIsNotAPackedDataset) {
  fs::create_directories(t_ / "tree/a");
  auto ds = Dataset::Open(t_ / "tree");
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(
      ds.status().message(),
      t_ / "tree" + ": not a packed dataset (no manifest; `fanstore pack SRC OUT` makes one)");
}

TEST_F(Corruption, RandomDamageNeverCrashes) {
  const std::string whole = testing::ReadFile(part_);
  std::mt19937 rng(42);
  for (int round = 0; round < 300; ++round) {
    std::string bytes = whole;
    for (int k = 0; k < 1 + round % 4; ++k)
      bytes[rng() % bytes.size()] ^= static_cast<char>(1 + rng() % 255);
    testing::WriteFile(part_, bytes);
    auto ds = Dataset::Open(t_ / "out");
    if (!ds.ok()) continue;
    for (const char* p : {"a/raw.bin", "a/text.txt", "b/small.txt", "link"}) {
      const MemberRef* r = (*ds)->Lookup(p);
      if (!r) continue;
      std::string got;
      const Status s = (*ds)->ReadMember(*r, [&](std::span<const uint8_t> b) {
        got.append(reinterpret_cast<const char*>(b.data()), b.size());
        return true;
      });
      // Either an error, or exactly the original bytes: never silently wrong.
      if (s.ok() && std::string(p) != "link") {
        EXPECT_EQ(got, testing::ReadFile(t_ / ("src/" + std::string(p))))
            << p << " round " << round;
      }
    }
  }
}

// A record the rest of the system cannot hold, with valid checksums (as a packer with a bug
// would write it), is refused when the partition is opened: a mode beyond st_mode's 16 bits
// (namespace images keep 16).
// Opens a one-partition dataset's partition at `file` with its root directory added: the
// records after it are the test's.
void StartPartition(PartitionWriter& w, const std::string& file) {
  ASSERT_TRUE(w.Open(file, 0, 1, 0, 1).ok());
  Member root;
  root.kind = Kind::kDir;
  root.mode = 040755;
  ASSERT_TRUE(w.Add(root).ok());
}

TEST(RecordChecks, AModeBeyondSixteenBitsIsRefused) {
  TempDir t;
  const std::string file = t / "part-00000.fsb";
  PartitionWriter w;
  ASSERT_NO_FATAL_FAILURE(StartPartition(w, file));
  Member odd;
  odd.path = "odd";
  odd.mode = 0x10000 | 0100644;
  ASSERT_TRUE(w.Add(odd).ok());
  ASSERT_TRUE(w.Finish().ok());
  PartitionReader r;
  const Status s = r.Open(file);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("mode beyond st_mode's 16 bits"), std::string::npos) << s.message();
}

// A path longer than the format's 65535 bytes (as a packer with a bug would write it) is
// refused when the partition is opened, with the path cut in the message; 65535 is fine.
TEST(RecordChecks, APathOverTheFormatsLimitIsRefused) {
  for (const uint64_t length : {kMaxPathBytes, kMaxPathBytes + 1}) {
    TempDir t;
    const std::string file = t / "part-00000.fsb";
    PartitionWriter w;
    ASSERT_NO_FATAL_FAILURE(StartPartition(w, file));
    Member empty;
    empty.path = std::string(length, 'p');
    empty.mode = 0100644;
    ASSERT_TRUE(w.Add(empty).ok());
    ASSERT_TRUE(w.Finish().ok());
    PartitionReader r;
    const Status s = r.Open(file);
    if (length == kMaxPathBytes) {
      EXPECT_TRUE(s.ok()) << s.message().substr(0, 300);
      continue;
    }
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("path longer than 65535 bytes"), std::string::npos)
        << s.message().substr(0, 300);
    EXPECT_LT(s.message().size(), 400u);
  }
}

// Raw members under a block are packed tight; one of a block or more off a block boundary
// (which could not be mapped straight from the blob) is refused.
TEST(RecordChecks, ABlockOfRawDataOffItsBoundaryIsRefused) {
  for (const uint64_t size : {uint64_t{4095}, uint64_t{4096}}) {
    TempDir t;
    const std::string file = t / "part-00000.fsb";
    PartitionWriter w;
    ASSERT_NO_FATAL_FAILURE(StartPartition(w, file));
    const std::vector<uint8_t> tiny(5, 'x'), data(size, 'y');
    Member a;
    a.path = "a";
    a.mode = 0100644;
    a.size = a.stored_size = tiny.size();
    auto at = w.BeginData(Codec::kRaw, tiny.size());
    ASSERT_TRUE(at.ok());
    a.data_offset = *at;
    a.crc32c = compress::Crc32c(0, tiny.data(), tiny.size());
    ASSERT_TRUE(w.Write(tiny).ok());
    ASSERT_TRUE(w.Add(a).ok());
    Member b = a;
    b.path = "b";
    b.size = b.stored_size = size;
    at = w.BeginData(Codec::kRaw, 0);  // as a packer that forgot the alignment
    ASSERT_TRUE(at.ok());
    b.data_offset = *at;
    b.crc32c = compress::Crc32c(0, data.data(), data.size());
    ASSERT_EQ(b.data_offset, kDataStart + 5);
    ASSERT_TRUE(w.Write(data).ok());
    ASSERT_TRUE(w.Add(b).ok());
    ASSERT_TRUE(w.Finish().ok());
    PartitionReader r;
    const Status s = r.Open(file);
    if (size < kBlockAlign) {
      EXPECT_TRUE(s.ok()) << s.message();
    } else {
      ASSERT_FALSE(s.ok());
      EXPECT_NE(s.message().find("inconsistent raw member"), std::string::npos) << s.message();
    }
  }
}

// A raw member over 8 MiB carries a CRC32C per 1 MiB block (Codec::kRawBlocks): damage is
// named with its block, in the bytes and in the checksums alike, and never read as data.
class RawBlocksCorruption : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::WriteFile(t_ / "src/big.bin", testing::RandomBytes(9 * (1 << 20) + 12345, 3));
    PackOptions o;
    o.src = t_ / "src";
    o.out = t_ / "out";
    o.partitions = 1;
    o.threads = 1;
    auto st = Pack(o);
    ASSERT_TRUE(st.ok()) << st.status().message();
    part_ = t_ / "out/part-00000.fsb";
    auto ds = Dataset::Open(t_ / "out");
    ASSERT_TRUE(ds.ok());
    rec_ = (*ds)->partitions()[0].member((*ds)->Lookup("big.bin")->index).rec;
  }
  Status ReadError() {
    auto ds = Dataset::Open(t_ / "out");
    if (!ds.ok()) return ds.status();
    return (*ds)->ReadMember(*(*ds)->Lookup("big.bin"),
                             [](std::span<const uint8_t>) { return true; });
  }
  TempDir t_;
  std::string part_;
  IndexRecord rec_;
};

TEST_F(RawBlocksCorruption, TheMemberIsStoredWithATableOfBlockChecksums) {
  EXPECT_EQ(static_cast<Codec>(rec_.codec), Codec::kRawBlocks);
  EXPECT_EQ(rec_.stored_size, rec_.size + 10 * 4 + 8);  // 10 blocks, then the trailer
  EXPECT_EQ(rec_.data_offset % kBlockAlign, 0u);
  EXPECT_TRUE(ReadError().ok());
}

TEST_F(RawBlocksCorruption, AFlippedDataByteIsNamedWithItsBlock) {
  testing::FlipByte(part_, rec_.data_offset + 3 * (1 << 20) + 77);
  const Status s = ReadError();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), part_ + ": member 'big.bin': checksum mismatch in block 3 (damaged data)");
}

TEST_F(RawBlocksCorruption, AFlippedChecksumOrTrailerByteIsAnError) {
  for (uint64_t at = rec_.size; at < rec_.stored_size; ++at) {
    testing::FlipByte(part_, rec_.data_offset + at);
    const Status s = ReadError();
    EXPECT_FALSE(s.ok()) << "stored byte " << at;
    EXPECT_NE(s.message().find("member 'big.bin'"), std::string::npos) << s.message();
    testing::FlipByte(part_, rec_.data_offset + at);
  }
  EXPECT_TRUE(ReadError().ok());
}

}  // namespace
}  // namespace fanstore::meta
