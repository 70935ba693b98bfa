#include "meta/namespace_image.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "io/pieces.h"
#include "meta/dataset.h"
#include "meta/exchange.h"
#include "meta/member.h"
#include "meta/pack.h"
#include "tests/testutil.h"

namespace fanstore::meta {
namespace {

namespace fs = std::filesystem;

class NamespaceImageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int c = 0; c < 3; ++c)
      for (int i = 0; i < 20; ++i)
        testing::WriteFile(t_ / ("src/train/c" + std::to_string(c) + "/f" + std::to_string(i)),
                           std::string(100 + i * c, 'x'));
    testing::WriteFile(t_ / "src/val/v.txt", "val");
    fs::create_directories(t_ / "src/empty");
    fs::create_symlink("train/c0/f1", t_ / "src/link");
    PackOptions o;
    o.src = t_ / "src";
    o.out = t_ / "out";
    o.partitions = 3;
    o.broadcast = {"val/**"};
    ASSERT_TRUE(Pack(o).ok());
    auto ds = Dataset::Open(t_ / "out");
    ASSERT_TRUE(ds.ok());
    ds_ = std::move(ds.value());
    std::vector<std::string> parts;
    for (size_t p = 0; p < ds_->partitions().size(); ++p) parts.push_back("/p" + std::to_string(p));
    bytes_ = BuildNamespaceImage(*ds_, parts);
  }
  NamespaceView View() {
    auto v =
        NamespaceView::Attach({reinterpret_cast<const uint8_t*>(bytes_.data()), bytes_.size()});
    EXPECT_TRUE(v.ok()) << v.status().message();
    return *v;
  }

  testing::TempDir t_;
  std::unique_ptr<Dataset> ds_;
  std::string bytes_;
};

TEST_F(NamespaceImageTest, EveryMemberIsFoundWithItsMetadataAndPartition) {
  const NamespaceView v = View();
  size_t checked = 0;
  for (uint32_t p = 0; p < ds_->partitions().size(); ++p) {
    const auto& part = ds_->partitions()[p];
    for (size_t i = 0; i < part.size(); ++i) {
      const MemberView m = part.member(i);
      const uint32_t e = v.Lookup(m.path);
      ASSERT_NE(e, kNoEntry) << m.path;
      const ImageEntry& ie = v.entry(e);
      EXPECT_EQ(v.path(ie), m.path);
      EXPECT_EQ(ie.mode, m.rec.mode) << m.path;
      EXPECT_EQ(ie.size, m.rec.size) << m.path;
      if (m.kind() != Kind::kDir) {
        EXPECT_EQ(ie.partition, p) << m.path;
        EXPECT_EQ(ie.data_offset, m.rec.data_offset) << m.path;
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 60u);
  EXPECT_EQ(v.target(v.entry(v.Lookup("link"))), "train/c0/f1");
  EXPECT_EQ(v.partition_count(), 4u);
  EXPECT_STREQ(v.partition_path(3), "/p3");
}

TEST_F(NamespaceImageTest, MissingPathsMiss) {
  const NamespaceView v = View();
  for (const char* p : {"nope", "train/c0/f99", "train/c0/", "/train", "train//c0", "trai"})
    EXPECT_EQ(v.Lookup(p), kNoEntry) << p;
  EXPECT_EQ(v.Lookup(""), 0u);  // the root
}

TEST_F(NamespaceImageTest, ChildrenAreInNameOrderAndDirectoriesCountTheirLinks) {
  const NamespaceView v = View();
  const ImageEntry& root = v.entry(0);
  std::vector<std::string> names;
  for (uint32_t k = 0; k < root.child_count; ++k)
    names.emplace_back(v.name(v.entry(v.Child(root, k))));
  EXPECT_EQ(names, (std::vector<std::string>{"empty", "link", "train", "val"}));
  EXPECT_EQ(root.nlink, 2u + 3u);                        // empty, train, val
  EXPECT_EQ(v.entry(v.Lookup("train")).nlink, 2u + 3u);  // c0, c1, c2
  EXPECT_EQ(v.entry(v.Lookup("train/c1")).child_count, 20u);
  EXPECT_EQ(v.entry(v.Lookup("train/c1/f3")).parent, v.Lookup("train/c1"));
}

TEST_F(NamespaceImageTest, DamagedImagesAreRefused) {
  auto attach = [](const std::string& b) {
    return NamespaceView::Attach({reinterpret_cast<const uint8_t*>(b.data()), b.size()}).ok();
  };
  EXPECT_FALSE(attach(bytes_.substr(0, bytes_.size() - 1)));  // truncated
  EXPECT_FALSE(attach(bytes_.substr(0, 10)));
  std::string bad = bytes_;
  bad[0] = 'X';
  EXPECT_FALSE(attach(bad));
}

// What a reader does with an attached image: walk every entry's path, parents and
// children, look every path up, and read a symlink's target and a partition's path.
size_t WalkEverything(const NamespaceView& v) {
  size_t sum = 0;
  for (uint32_t i = 0; i < v.size(); ++i) {
    const ImageEntry& e = v.entry(i);
    sum += v.path(e).size() + v.name(e).size() + v.Lookup(v.path(e));
    uint32_t hops = 0;
    for (uint32_t up = i; up != 0; up = v.entry(up).parent) ++hops;
    sum += hops;
    if (e.kind == static_cast<uint8_t>(Kind::kDir))
      for (uint32_t c = 0; c < e.child_count; ++c) sum += v.entry(v.Child(e, c)).size;
    else if (e.kind == static_cast<uint8_t>(Kind::kSymlink))
      sum += v.target(e).size();
    else
      sum += std::strlen(v.partition_path(e.partition));
  }
  return sum;
}

// Every byte of an image changed to a few values: refused with a message, or an image a
// reader can walk whole (the asan build checks every access; before the checks, 62 of 150
// random changes crashed `ls` or `cat` under fanrun).
TEST_F(NamespaceImageTest, EveryChangedByteIsRefusedOrSafeToWalk) {
  size_t refused = 0, tried = 0;
  alignas(64) static uint8_t buf[1 << 16];
  ASSERT_LE(bytes_.size(), sizeof buf);
  for (size_t i = 0; i < bytes_.size(); ++i)
    for (const uint8_t x : {0x01, 0x80, 0xff}) {
      std::memcpy(buf, bytes_.data(), bytes_.size());
      buf[i] ^= x;
      ++tried;
      auto v = NamespaceView::Attach({buf, bytes_.size()});
      if (!v.ok()) {
        EXPECT_EQ(v.status().message().rfind("namespace image: ", 0), 0u) << v.status().message();
        ++refused;
        continue;
      }
      WalkEverything(*v);
    }
  // Times, sizes, checksums, owners, the dataset id and the padding may hold any value
  // (a wrong size or checksum is the member read's EIO); about 40 % of the bytes are
  // structure and must be refused when changed.
  EXPECT_GT(refused, tried / 3) << refused << " of " << tried;
}

TEST_F(NamespaceImageTest, LayoutOnlyAttachStillRefusesBadLayouts) {
  alignas(64) static uint8_t buf[1 << 16];
  std::memcpy(buf, bytes_.data(), bytes_.size());
  EXPECT_TRUE(NamespaceView::AttachLayout({buf, bytes_.size()}).ok());
  EXPECT_FALSE(NamespaceView::AttachLayout({buf, bytes_.size() - 1}).ok());
  buf[0] ^= 1;
  EXPECT_FALSE(NamespaceView::AttachLayout({buf, bytes_.size()}).ok());
}

TEST_F(NamespaceImageTest, OversizedCountsAreRefusedWithoutOverflow) {
  alignas(64) static uint8_t buf[1 << 16];
  std::memcpy(buf, bytes_.data(), bytes_.size());
  ImageHeader h;
  std::memcpy(&h, buf, sizeof h);
  h.bucket_count = 1ull << 60;  // * 16 wraps to 0
  std::memcpy(buf, &h, sizeof h);
  auto v = NamespaceView::Attach({buf, bytes_.size()});
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().message(), "namespace image: inconsistent layout");
}

// A parent may come after its child in the entries (they are in decode order); its path
// is checked before the child's parent path is compared with it, so a damaged one is
// refused, not read outside the image (the fuzzer's image_fuzz found that read).
TEST_F(NamespaceImageTest, ALaterParentsPathIsCheckedBeforeItIsCompared) {
  alignas(64) static uint8_t buf[1 << 16];
  std::memcpy(buf, bytes_.data(), bytes_.size());
  const NamespaceView v = View();
  const uint32_t child = v.Lookup("train/c0/f9"), dir = v.Lookup("val");
  ASSERT_NE(child, kNoEntry);
  ASSERT_NE(dir, kNoEntry);
  ASSERT_LT(child, dir);  // (path order within a partition; "val" is after "train")
  ImageHeader h;
  std::memcpy(&h, buf, sizeof h);
  auto* entries = reinterpret_cast<ImageEntry*>(buf + h.entries_off);
  ImageEntry& old_parent = entries[entries[child].parent];
  ASSERT_EQ(v.Child(v.entry(entries[child].parent), old_parent.child_count - 1), child);
  --old_parent.child_count;  // (f9 is its last child: the lists before it stay consistent)
  entries[child].parent = dir;
  entries[dir].path_len = static_cast<uint16_t>(std::string_view("train/c0").size());
  entries[dir].path_off = 0xffffff00u;
  auto bad = NamespaceView::Attach({buf, bytes_.size()});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("parent's path is outside the string table"),
            std::string::npos)
      << bad.status().message();
}

TEST_F(NamespaceImageTest, PathOpenFlagFollowsTheParentsModes) {
  auto ds = Dataset::Open(t_ / "out");
  ASSERT_TRUE(ds.ok());
  const NamespaceView v = View();
  for (uint32_t i = 0; i < v.size(); ++i)
    EXPECT_EQ(v.entry(i).flags, kEntryPathOpen) << v.path(v.entry(i));  // all 0755 here
}

// The multi-node path: every partition encoded (as nodes do before the Allgatherv), the
// blocks concatenated in any order and built: the same image as on one node.
TEST_F(NamespaceImageTest, ExchangedMembersBuildTheSameImage) {
  std::string wire;
  for (uint32_t p = static_cast<uint32_t>(ds_->partitions().size()); p-- > 0;)
    EncodeMembers(ds_->partitions()[p], p, &wire);
  std::vector<std::string> parts;
  for (size_t p = 0; p < ds_->partitions().size(); ++p) parts.push_back("/p" + std::to_string(p));
  auto image = BuildNamespaceImage(wire, parts, ds_->manifest().dataset_id);
  ASSERT_TRUE(image.ok()) << image.status().message();
  EXPECT_TRUE(*image == bytes_) << "the images differ";
  // Front-coded paths and varint fields: far below the index's 64-byte records.
  size_t members = 0;
  for (const auto& part : ds_->partitions()) members += part.size();
  EXPECT_LT(wire.size(), members * 40) << wire.size() << " bytes for " << members << " members";
}

std::vector<NsMember> MembersOf(const PartitionReader& r) {
  std::vector<NsMember> out;
  for (size_t i = 0; i < r.size(); ++i) {
    const MemberView v = r.member(i);
    out.push_back(NsMember{v.path, v.target, v.rec});
  }
  return out;
}

std::string Block(uint32_t partition, const std::vector<NsMember>& members) {
  std::string out;
  BlockEncoder enc(partition, &out);
  for (const NsMember& m : members) enc.Add(m);
  enc.Finish();
  return out;
}

TEST_F(NamespaceImageTest, EveryFieldSurvivesTheExchange) {
  // Values the varint and delta coding must carry: the extremes of every field.
  std::vector<NsMember> ms = MembersOf(ds_->partitions()[0]);
  ASSERT_GE(ms.size(), 3u);
  NsMember& odd = ms.back();
  ASSERT_EQ(odd.rec.kind, static_cast<uint8_t>(Kind::kFile));
  odd.rec.size = UINT64_MAX - 1;
  odd.rec.stored_size = 12345;
  odd.rec.data_offset = UINT64_MAX - 7;
  odd.rec.mtime_ns = INT64_MIN + 3;
  odd.rec.mode = S_IFREG | 07777;  // every permission bit (the image keeps 16)
  odd.rec.uid = UINT32_MAX;
  odd.rec.gid = 0;
  odd.rec.crc32c = 0xdeadbeef;
  odd.rec.codec = static_cast<uint8_t>(Codec::kDeflate);
  const std::string wire = Block(0, ms);
  const std::vector<std::string> parts(ds_->partitions().size(), "");
  auto image = BuildNamespaceImage(wire, parts, 7);
  ASSERT_TRUE(image.ok()) << image.status().message();
  auto v = NamespaceView::Attach({reinterpret_cast<const uint8_t*>(image->data()), image->size()});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->dataset_id(), 7u);
  for (const NsMember& m : ms) {
    const uint32_t i = v->Lookup(m.path);
    ASSERT_NE(i, kNoEntry) << m.path;
    const ImageEntry& e = v->entry(i);
    EXPECT_EQ(e.size, m.rec.size) << m.path;
    EXPECT_EQ(e.stored_size, m.rec.stored_size) << m.path;
    EXPECT_EQ(e.mtime_ns, m.rec.mtime_ns) << m.path;
    EXPECT_EQ(e.mode, m.rec.mode) << m.path;
    EXPECT_EQ(e.uid, m.rec.uid) << m.path;
    EXPECT_EQ(e.gid, m.rec.gid) << m.path;
    // (a directory's bytes there are its children's)
    if (e.kind != static_cast<uint8_t>(Kind::kDir)) {
      EXPECT_EQ(e.data_offset, m.rec.data_offset) << m.path;
      EXPECT_EQ(e.crc32c, m.rec.crc32c) << m.path;
    }
    EXPECT_EQ(e.codec, m.rec.codec) << m.path;
    EXPECT_EQ(e.kind, m.rec.kind) << m.path;
  }
}

// The node cache's keys for pieces of large members (io/pieces.h): the same numbering from
// the same image, every piece of every member over 8 MiB stored exactly once, past the
// entries, and nothing else split.
TEST_F(NamespaceImageTest, PiecesOfLargeMembersGetKeysPastTheEntries) {
  std::vector<NsMember> ms = MembersOf(ds_->partitions()[0]);
  ASSERT_GE(ms.size(), 4u);
  const uint64_t sizes[] = {io::kPiecedAbove, io::kPiecedAbove + 1, 3 * io::kPiecedAbove,
                            1ull << 40};
  std::vector<std::string> large;
  size_t k = 0;
  for (NsMember& m : ms) {
    if (m.rec.kind != static_cast<uint8_t>(Kind::kFile) || k == 4) continue;
    m.rec.size = m.rec.stored_size = sizes[k++];
    large.push_back(std::string(m.path));
  }
  ASSERT_EQ(k, 4u);
  const std::vector<std::string> parts(ds_->partitions().size(), "");
  auto image = BuildNamespaceImage(Block(0, ms), parts, 1);
  ASSERT_TRUE(image.ok()) << image.status().message();
  auto v = NamespaceView::Attach({reinterpret_cast<const uint8_t*>(image->data()), image->size()});
  ASSERT_TRUE(v.ok());
  io::PieceIndex idx;
  idx.Build(*v);
  // 8 MiB exactly is not pieced; 8 MiB + 1 byte is one piece more than 8 MiB holds.
  EXPECT_FALSE(idx.enabled(v->Lookup(large[0])));
  const uint64_t per = io::kPiecedAbove / io::kPieceBytes;
  const uint64_t counts[] = {0, per + 1, 3 * per, (1ull << 40) / io::kPieceBytes};
  EXPECT_EQ(idx.keys(), v->size() + counts[1] + counts[2] + counts[3]);
  std::vector<int> seen(idx.keys(), 0);
  for (size_t j = 1; j < 4; ++j) {
    const uint32_t e = v->Lookup(large[j]);
    ASSERT_TRUE(idx.enabled(e));
    EXPECT_EQ(io::PieceCount(v->entry(e).stored_size), counts[j]);
    for (uint64_t p = 0; p < counts[j]; ++p) {
      const uint32_t key = idx.Key(e, p);
      ASSERT_GE(key, v->size());
      ASSERT_LT(key, idx.keys());
      ++seen[key];
      uint32_t back_e;
      uint64_t back_p;
      ASSERT_TRUE(idx.Split(key, *v, &back_e, &back_p));
      EXPECT_EQ(back_e, e);
      EXPECT_EQ(back_p, p);
    }
  }
  for (uint64_t key = v->size(); key < idx.keys(); ++key) EXPECT_EQ(seen[key], 1) << key;
  uint32_t e;
  uint64_t p;
  EXPECT_FALSE(idx.Split(0, *v, &e, &p));  // an entry is not a piece
  EXPECT_FALSE(idx.Split(idx.keys(), *v, &e, &p));
  // Names for messages.
  const uint32_t second = v->Lookup(large[1]);
  EXPECT_EQ(idx.Name(second, *v), "'" + large[1] + "'");
  EXPECT_EQ(idx.Name(idx.Key(second, 2), *v), "'" + large[1] + "' (piece 2)");
  EXPECT_EQ(idx.Name(idx.keys(), *v), "key " + std::to_string(idx.keys()));
  // The last piece is short; the bound the agent sizes its table with holds.
  EXPECT_EQ(io::PieceLength(io::kPiecedAbove + 1, per), 1u);
  EXPECT_EQ(io::PieceLength(io::kPiecedAbove + 1, per - 1), io::kPieceBytes);
  EXPECT_EQ(io::PieceLength(3 * io::kPiecedAbove, 3 * per - 1), io::kPieceBytes);
  uint64_t stored = 0;
  for (uint32_t i = 0; i < v->size(); ++i) stored += v->entry(i).stored_size;
  EXPECT_LE(idx.keys(), io::KeysAtMost(v->size(), stored));
}

// What an image entry cannot hold is refused with a line naming the member, never cut.
TEST_F(NamespaceImageTest, ValuesAnEntryCannotHoldAreRefused) {
  const std::vector<std::string> parts(ds_->partitions().size(), "");
  std::vector<NsMember> ms = MembersOf(ds_->partitions()[0]);
  ms.back().rec.mode = 0x10000 | 0100644;
  auto r = BuildNamespaceImage(Block(0, ms), parts, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'" + std::string(ms.back().path) +
                                      "' of partition 0 has an invalid mode"),
            std::string::npos)
      << r.status().message();
  // Paths: the exchange carries at most kMaxPathBytes, all of which an entry's length holds.
  ms = MembersOf(ds_->partitions()[0]);
  const std::string long_path = std::string(ms.back().path) + std::string(kMaxPathBytes + 1, 'x');
  ms.back().path = long_path;
  r = BuildNamespaceImage(Block(0, ms), parts, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("bad path length"), std::string::npos)  // (the exchange's)
      << r.status().message();
  const std::string longest =
      long_path.substr(0, kMaxPathBytes);  // the longest the exchange carries
  ms.back().path = longest;
  r = BuildNamespaceImage(Block(0, ms), parts, 1);
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto v = NamespaceView::Attach({reinterpret_cast<const uint8_t*>(r->data()), r->size()});
  ASSERT_TRUE(v.ok());
  EXPECT_NE(v->Lookup(ms.back().path), kNoEntry);
}

TEST_F(NamespaceImageTest, DamagedExchangeBlocksAreRefused) {
  std::string wire;
  EncodeMembers(ds_->partitions()[0], 0, &wire);
  const std::vector<std::string> parts(ds_->partitions().size(), "");
  ASSERT_TRUE(BuildNamespaceImage(wire, parts, 1).ok());
  for (size_t cut = 1; cut < wire.size(); ++cut) {
    auto r = BuildNamespaceImage(std::string_view(wire).substr(0, cut), parts, 1);
    ASSERT_FALSE(r.ok()) << cut;
    EXPECT_NE(r.status().message().find("namespace"), std::string::npos) << r.status().message();
  }
  std::string bad = wire;
  bad[0] = static_cast<char>(parts.size());  // partition id out of range
  EXPECT_FALSE(BuildNamespaceImage(bad, parts, 1).ok());
  bad = wire;
  bad[kBlockHeaderSize] = 0;  // the first record's kind
  EXPECT_FALSE(BuildNamespaceImage(bad, parts, 1).ok());
  bad = wire + std::string(kBlockHeaderSize, '\0');  // a header claiming no members
  bad[wire.size() + 4] = 5;
  EXPECT_FALSE(BuildNamespaceImage(bad, parts, 1).ok());
  // A varint past 64 bits (a root directory whose size takes ten bytes, the last > 1).
  const auto root_block = [](const std::string& size_varint) {
    // (a directory, mode 040755 as a varint, then the size)
    std::string rec = std::string("\x62\0\0\xed\x83\x01", 6) + size_varint + std::string(6, '\0');
    std::string h(kBlockHeaderSize, '\0');
    h[4] = 1;                               // one member
    h[16] = static_cast<char>(rec.size());  // record bytes
    return h + rec;
  };
  EXPECT_TRUE(BuildNamespaceImage(root_block(std::string(9, '\xff') + '\x01'), parts, 1).ok());
  EXPECT_FALSE(BuildNamespaceImage(root_block(std::string(9, '\xff') + '\x02'), parts, 1).ok());
  // Any byte changed to any of a few values: an error or a consistent image, never a
  // crash or a read out of bounds (the asan build checks the latter).
  size_t refused = 0;
  for (size_t i = 0; i < wire.size(); ++i)
    for (const int x : {0x00, 0x01, 0x7f, 0x80, 0xff}) {
      bad = wire;
      bad[i] = static_cast<char>(bad[i] ^ x);
      auto r = BuildNamespaceImage(bad, parts, 1);
      if (!r.ok()) {
        ++refused;
        continue;
      }
      auto v = NamespaceView::Attach({reinterpret_cast<const uint8_t*>(r->data()), r->size()});
      ASSERT_TRUE(v.ok()) << i << ": " << v.status().message();
      for (uint32_t e = 0; e < v->size(); ++e) ASSERT_EQ(v->Lookup(v->path(v->entry(e))), e) << i;
    }
  EXPECT_GT(refused, wire.size());
}

TEST_F(NamespaceImageTest, DuplicateFilesAndOrphansAreRefused) {
  std::string wire;
  for (uint32_t p = 0; p < ds_->partitions().size(); ++p)
    EncodeMembers(ds_->partitions()[p], p, &wire);
  const std::vector<std::string> parts(ds_->partitions().size(), "");
  std::vector<NsMember> all = MembersOf(ds_->partitions()[0]);
  std::vector<NsMember> dup;
  for (const NsMember& m : all)
    if (m.rec.kind == static_cast<uint8_t>(Kind::kFile)) {
      dup.push_back(m);
      break;
    }
  ASSERT_EQ(dup.size(), 1u);
  auto r = BuildNamespaceImage(wire + Block(1, dup), parts, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("is in partitions 0 and 1"), std::string::npos)
      << r.status().message();
  std::vector<NsMember> orphan = {all.back()};
  orphan.back().path = "no/such/dir/file";
  r = BuildNamespaceImage(wire + Block(1, orphan), parts, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("has no parent directory"), std::string::npos);
  // No root: the blocks without their root directories.
  std::vector<NsMember> rootless;
  for (const NsMember& m : all)
    if (!m.path.empty()) rootless.push_back(m);
  EXPECT_FALSE(BuildNamespaceImage(Block(0, rootless), parts, 1).ok());
  // Partition ids past 16 bits survive into the image; the root may come from any block
  // (here only from the last one decoded).
  std::string big;
  for (uint32_t p = 0; p < ds_->partitions().size(); ++p) {
    std::vector<NsMember> ms = MembersOf(ds_->partitions()[p]);
    if (p != 0) ms.erase(ms.begin());  // the root
    big += Block(kMaxPartitions - 1 - (p != 0), ms);
  }
  auto image = BuildNamespaceImage(big, std::vector<std::string>(kMaxPartitions, ""), 1);
  ASSERT_TRUE(image.ok()) << image.status().message();
  auto v = NamespaceView::Attach({reinterpret_cast<const uint8_t*>(image->data()), image->size()});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->entry(0).path_len, 0u);
  EXPECT_EQ(v->entry(0).kind, static_cast<uint8_t>(Kind::kDir));
  for (uint32_t e = 1; e < v->size(); ++e) {
    const ImageEntry& x = v->entry(e);
    ASSERT_EQ(v->Lookup(v->path(x)), e);
    EXPECT_EQ(v->path(v->entry(x.parent)), ParentPath(v->path(x))) << v->path(x);
  }
  EXPECT_GE(v->entry(v->Lookup("train/c1/f3")).partition, kMaxPartitions - 2);
  EXPECT_EQ(std::string(v->partition_path(kMaxPartitions - 1)), "");
}

}  // namespace
}  // namespace fanstore::meta
