// Reading members (runtime/data/member_io.h ReadMember) in one process, without the hook, from
// the blobs of a small packed tree (tests/runtime/attached_image.h): raw, deflated whole and
// block-deflated members, whole and in slices at every kind of offset, against the source
// bytes; and a damaged compressed member, which is EIO, not wrong bytes.
#include "runtime/data/member_io.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <random>
#include <string>

#include "meta/format.h"
#include "runtime/process/state.h"
#include "tests/runtime/attached_image.h"

namespace fanstore::runtime {
namespace {

class MemberIoTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NE(AttachedImage::Get(), nullptr); }
  static uint32_t EntryOf(const std::string& path) { return Get()->ns.Lookup(path); }
  static const meta::ImageEntry& Meta(const std::string& path) {
    return Get()->ns.entry(EntryOf(path));
  }
  // The member's bytes as ReadMember gives them, in reads of `chunk` bytes.
  static std::string ReadAll(uint32_t entry, size_t chunk) {
    std::string out;
    std::string buf(chunk, 0);
    for (uint64_t off = 0;;) {
      const ssize_t n = ReadMember(entry, off, buf.data(), chunk);
      if (n < 0) return "error " + std::to_string(-n);
      if (n == 0) return out;
      out.append(buf.data(), static_cast<size_t>(n));
      off += static_cast<uint64_t>(n);
    }
  }
};

TEST_F(MemberIoTest, EachCodecIsPackedAsExpected) {
  EXPECT_EQ(Meta("m/raw.bin").codec, static_cast<uint8_t>(meta::Codec::kRaw));
  EXPECT_EQ(Meta("m/text.txt").codec, static_cast<uint8_t>(meta::Codec::kDeflate));
  EXPECT_EQ(Meta("m/big.txt").codec, static_cast<uint8_t>(meta::Codec::kDeflateBlocks));
}

TEST_F(MemberIoTest, WholeAndChunkedReadsGiveTheSourceBytes) {
  for (const char* rel : {"m/raw.bin", "m/text.txt", "m/big.txt", "train/b/y.jpg"}) {
    SCOPED_TRACE(rel);
    const std::string want = AttachedImage::Get()->Source(rel);
    const uint32_t e = EntryOf(rel);
    ASSERT_NE(e, meta::kNoEntry);
    for (size_t chunk : {size_t{1} << 22, size_t{65536}, size_t{4093}}) {
      const std::string got = ReadAll(e, chunk);
      ASSERT_EQ(got.size(), want.size()) << "chunk " << chunk << ": " << got.substr(0, 40);
      EXPECT_TRUE(got == want) << "chunk " << chunk;
    }
  }
}

TEST_F(MemberIoTest, SlicesAtRandomOffsetsAndPastTheEnd) {
  std::mt19937_64 rng(7);
  for (const char* rel : {"m/raw.bin", "m/text.txt", "m/big.txt"}) {
    SCOPED_TRACE(rel);
    const std::string want = AttachedImage::Get()->Source(rel);
    const uint32_t e = EntryOf(rel);
    std::string buf(300000, 0);
    for (int i = 0; i < 40; ++i) {
      const uint64_t off = rng() % (want.size() + 10);
      const size_t len = 1 + rng() % buf.size();
      const ssize_t n = ReadMember(e, off, buf.data(), len);
      const size_t expect = off >= want.size() ? 0 : std::min<size_t>(len, want.size() - off);
      ASSERT_EQ(n, static_cast<ssize_t>(expect)) << "off " << off << " len " << len;
      EXPECT_EQ(0, want.compare(off < want.size() ? off : want.size(), expect, buf.data(), expect))
          << "off " << off << " len " << len;
    }
  }
}

TEST_F(MemberIoTest, ADamagedCompressedMemberIsEio) {
  const meta::ImageEntry m = Meta("m/bad.txt");  // (a copy: the image is not changed)
  ASSERT_EQ(m.codec, static_cast<uint8_t>(meta::Codec::kDeflate));
  // Flip one byte in the middle of its stored bytes, in its partition blob.
  const std::string blob = Get()->ns.partition_path(m.partition);
  const int fd = ::open(blob.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const off_t at = static_cast<off_t>(m.data_offset + m.stored_size / 2);
  char c;
  ASSERT_EQ(::pread(fd, &c, 1, at), 1);
  c = static_cast<char>(c ^ 0x5a);
  ASSERT_EQ(::pwrite(fd, &c, 1, at), 1);
  ::close(fd);
  std::string buf(m.size, 0);
  EXPECT_EQ(ReadMember(EntryOf("m/bad.txt"), 0, buf.data(), buf.size()), -EIO);
  EXPECT_EQ(ReadMember(EntryOf("m/bad.txt"), 1000, buf.data(), 10), -EIO);
  // The other members of the blob are unharmed.
  EXPECT_EQ(ReadAll(EntryOf("m/text.txt"), 65536), AttachedImage::Get()->Source("m/text.txt"));
}

}  // namespace
}  // namespace fanstore::runtime
