#include "meta/format.h"

#include <gtest/gtest.h>

#include <cstring>

#include "meta/blocks.h"

namespace fanstore::meta {
namespace {

PartitionHeader SampleHeader() {
  PartitionHeader h{};
  h.version = kFormatVersion;
  h.flags = kFlagBroadcast;
  h.partition_id = 3;
  h.partition_count = 9;
  h.dataset_id = 0x0123456789abcdefull;
  h.member_count = 42;
  h.data_end = 1 << 20;
  return h;
}

TEST(PartitionHeader, RoundTripsAndIsLittleEndian) {
  uint8_t b[PartitionHeader::kSize];
  SampleHeader().EncodeTo(b);
  EXPECT_EQ(std::memcmp(b, "FANSTPRT", 8), 0);
  EXPECT_EQ(b[16], 3);  // partition_id, low byte first
  EXPECT_EQ(b[24], 0xef);
  PartitionHeader h;
  ASSERT_TRUE(PartitionHeader::DecodeFrom(b, &h).ok());
  EXPECT_EQ(h.partition_id, 3u);
  EXPECT_EQ(h.partition_count, 9u);
  EXPECT_EQ(h.dataset_id, 0x0123456789abcdefull);
  EXPECT_EQ(h.member_count, 42u);
  EXPECT_EQ(h.data_end, 1u << 20);
  EXPECT_EQ(h.flags, kFlagBroadcast);
}

TEST(PartitionHeader, WrongMagicIsRejected) {
  uint8_t b[PartitionHeader::kSize];
  SampleHeader().EncodeTo(b);
  b[0] = 'X';
  PartitionHeader h;
  const Status s = PartitionHeader::DecodeFrom(b, &h);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("magic"), std::string::npos);
}

TEST(PartitionHeader, WrongVersionIsRejected) {
  PartitionHeader in = SampleHeader();
  in.version = 7;
  uint8_t b[PartitionHeader::kSize];
  in.EncodeTo(b);
  PartitionHeader h;
  const Status s = PartitionHeader::DecodeFrom(b, &h);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("version 7"), std::string::npos);
}

TEST(PartitionHeader, AnyFlippedByteIsDetected) {
  uint8_t good[PartitionHeader::kSize];
  SampleHeader().EncodeTo(good);
  for (size_t i = 0; i < 64; ++i) {
    uint8_t b[PartitionHeader::kSize];
    std::memcpy(b, good, sizeof b);
    b[i] ^= 0x10;
    PartitionHeader h;
    EXPECT_FALSE(PartitionHeader::DecodeFrom(b, &h).ok()) << "byte " << i;
  }
}

TEST(PartitionFooter, RoundTripsAndDetectsDamage) {
  PartitionFooter f{};
  f.version = kFormatVersion;
  f.partition_id = 1;
  f.index_offset = 8192;
  f.member_count = 2;
  f.strings_offset = 8192 + 128;
  f.strings_size = 10;
  f.dataset_id = 77;
  f.index_crc = 0xdeadbeef;
  uint8_t b[PartitionFooter::kSize];
  f.EncodeTo(b);
  PartitionFooter g;
  ASSERT_TRUE(PartitionFooter::DecodeFrom(b, &g).ok());
  EXPECT_EQ(g.index_crc, 0xdeadbeefu);
  EXPECT_EQ(g.strings_offset, 8192u + 128);
  b[20] ^= 1;
  EXPECT_FALSE(PartitionFooter::DecodeFrom(b, &g).ok());
}

TEST(IndexRecord, RoundTripsEveryField) {
  IndexRecord r{};
  r.data_offset = 1ull << 40;
  r.size = 5ull << 30;  // > 4 GiB
  r.stored_size = 123;
  r.mtime_ns = -5;  // before the epoch
  r.path_offset = 99;
  r.path_length = 7;
  r.mode = 0100644;
  r.uid = 1000;
  r.gid = 100;
  r.crc32c = 0xabcdef01;
  r.kind = static_cast<uint8_t>(Kind::kFile);
  r.codec = static_cast<uint8_t>(Codec::kDeflate);
  uint8_t b[IndexRecord::kSize];
  r.EncodeTo(b);
  const IndexRecord d = IndexRecord::DecodeFrom(b);
  EXPECT_EQ(std::memcmp(&d, &r, sizeof r), 0);
}

TEST(DeflateBlocks, TrailerAndEntriesRoundTripLittleEndian) {
  const uint64_t size = 3 * kDeflateBlockBytes + 5;  // 4 blocks, the last of 5 bytes
  EXPECT_EQ(BlockCount(size), 4u);
  EXPECT_EQ(BlockPlainBytes(size, 0), kDeflateBlockBytes);
  EXPECT_EQ(BlockPlainBytes(size, 3), 5u);
  uint8_t tail[kBlockTrailerBytes], ent[kBlockEntryBytes];
  EncodeBlockTrailer(4, tail);
  EXPECT_EQ(tail[0], 0);  // 1 MiB = 0x00100000, low byte first
  EXPECT_EQ(tail[2], 0x10);
  EXPECT_EQ(tail[4], 4);
  const uint64_t stored = 1000 + BlockTableBytes(4);
  BlockTrailer t;
  ASSERT_TRUE(DecodeBlockTrailer(tail, size, stored, &t));
  EXPECT_EQ(t.count, 4u);
  EXPECT_EQ(t.table_offset, 1000u);
  EncodeBlockEntry({700, 300, 0xdeadbeef}, ent);
  EXPECT_EQ(ent[0], 700 & 0xff);
  BlockEntry e;
  ASSERT_TRUE(DecodeBlockEntry(ent, t, &e));
  EXPECT_EQ(e.offset, 700u);
  EXPECT_EQ(e.length, 300u);
  EXPECT_EQ(e.crc32c, 0xdeadbeefu);
}

TEST(DeflateBlocks, WhatDoesNotFitTheMemberIsRefused) {
  const uint64_t size = 3 * kDeflateBlockBytes + 5;
  uint8_t tail[kBlockTrailerBytes], ent[kBlockEntryBytes];
  BlockTrailer t;
  EncodeBlockTrailer(3, tail);  // a block count that does not match the size
  EXPECT_FALSE(DecodeBlockTrailer(tail, size, 1000 + BlockTableBytes(3), &t));
  EncodeBlockTrailer(4, tail);
  EXPECT_FALSE(DecodeBlockTrailer(tail, size, BlockTableBytes(4) + 3, &t));  // < 1 byte per stream
  EXPECT_FALSE(DecodeBlockTrailer(tail, size, 10, &t));  // no room for the table
  EXPECT_FALSE(DecodeBlockTrailer(tail, 0, 1000, &t));
  tail[2] = 0x20;  // another block size
  EXPECT_FALSE(DecodeBlockTrailer(tail, size, 1000 + BlockTableBytes(4), &t));
  EncodeBlockTrailer(4, tail);
  ASSERT_TRUE(DecodeBlockTrailer(tail, size, 1000 + BlockTableBytes(4), &t));
  BlockEntry e;
  EncodeBlockEntry({900, 101, 0}, ent);  // runs into the table
  EXPECT_FALSE(DecodeBlockEntry(ent, t, &e));
  EncodeBlockEntry({~uint64_t{0} - 5, 100, 0}, ent);  // wraps around
  EXPECT_FALSE(DecodeBlockEntry(ent, t, &e));
  EncodeBlockEntry({10, 0, 0}, ent);  // empty stream
  EXPECT_FALSE(DecodeBlockEntry(ent, t, &e));
  EncodeBlockEntry({900, 100, 0}, ent);  // ends where the table starts: fits
  EXPECT_TRUE(DecodeBlockEntry(ent, t, &e));
}

TEST(PartitionFileName, IsZeroPadded) {
  EXPECT_EQ(PartitionFileName(0), "part-00000.fsb");
  EXPECT_EQ(PartitionFileName(123456), "part-123456.fsb");
}

}  // namespace
}  // namespace fanstore::meta
