// The node cache arena: what the agent admits is what a reader mapping the file finds,
// eviction is FIFO with one second chance for members read since admission, and a reader
// racing with evictions never takes another member's bytes for its own (the seqlock).
#include "io/node_cache.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <random>
#include <thread>

#include "tests/testutil.h"

namespace fanstore::io {
namespace {

// Deterministic contents per member, so any misplaced byte is visible.
std::vector<uint8_t> Bytes(uint32_t entry, size_t len) {
  std::vector<uint8_t> b(len);
  for (size_t i = 0; i < len; ++i) b[i] = static_cast<uint8_t>(entry * 131 + i * 7 + (i >> 8));
  return b;
}

// A reader's mapping of the arena, as the runtime makes it.
struct Reader {
  const uint8_t* map = nullptr;
  uint8_t* refs = nullptr;
  uint64_t map_bytes = 0, refs_bytes = 0;
  ArenaView view;
  bool Open(const std::string& path, uint32_t entries) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || ::fstat(fd, &st) != 0) return false;
    map_bytes = static_cast<uint64_t>(st.st_size);
    map = static_cast<const uint8_t*>(::mmap(nullptr, map_bytes, PROT_READ, MAP_SHARED, fd, 0));
    ArenaHeader h;
    std::memcpy(&h, map, sizeof h);
    refs_bytes = h.data_offset - h.refs_offset;
    refs = static_cast<uint8_t*>(::mmap(nullptr, refs_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                                        static_cast<off_t>(h.refs_offset)));
    ::close(fd);
    return view.Attach(map, map_bytes, refs, entries);
  }
  ~Reader() {
    if (map) ::munmap(const_cast<uint8_t*>(map), map_bytes);
    if (refs) ::munmap(refs, refs_bytes);
  }
  // The member's bytes if cached and unchanged during the copy; `pause` yields the core
  // halfway through the copy, to widen the window a racing eviction can hit.
  bool Get(uint32_t entry, size_t len, std::vector<uint8_t>* out, bool pause = false) const {
    const uint8_t* p = nullptr;
    const uint64_t w = view.Find(entry, len, &p);
    if (w == 0) return false;
    out->assign(p, p + len / 2);
    if (pause) std::this_thread::yield();
    out->insert(out->end(), p + len / 2, p + len);
    return view.Still(entry, w);
  }
};

class NodeCacheTest : public ::testing::Test {
 protected:
  fanstore::testing::TempDir dir_;
  std::string path_ = dir_.path() + "/arena";
};

TEST_F(NodeCacheTest, WhatIsAdmittedIsFoundByAReaderWithItsBytes) {
  NodeCache c;
  ASSERT_TRUE(c.Create(path_, 100, 1 << 20).ok());
  Reader r;
  ASSERT_TRUE(r.Open(path_, 100));
  for (uint32_t e : {0u, 7u, 99u})
    ASSERT_TRUE(c.Admit(e, Bytes(e, 1000 + e).data(), 1000 + e).ok());
  ASSERT_TRUE(c.Admit(5, nullptr, 0).ok());  // an empty member is cached too
  std::vector<uint8_t> got;
  for (uint32_t e : {0u, 7u, 99u}) {
    ASSERT_TRUE(r.Get(e, 1000 + e, &got)) << e;
    EXPECT_EQ(got, Bytes(e, 1000 + e)) << e;
  }
  EXPECT_TRUE(r.Get(5, 0, &got));
  EXPECT_FALSE(r.Get(1, 10, &got));
  EXPECT_FALSE(r.Get(100, 10, &got));           // past the table
  EXPECT_FALSE(r.Get(0, (1 << 20) + 1, &got));  // a length the data area cannot hold
  EXPECT_TRUE(c.Contains(7));
  EXPECT_FALSE(c.Contains(8));
  std::vector<uint8_t> copy;
  ASSERT_TRUE(c.Read(7, 1007, &copy));
  EXPECT_EQ(copy, Bytes(7, 1007));
  EXPECT_FALSE(c.Admit(1, Bytes(1, c.max_member() + 1).data(), c.max_member() + 1).ok());
  EXPECT_FALSE(c.Admit(100, Bytes(1, 10).data(), 10).ok());
}

// The agent makes the cache at the end of stage-in for the manifest's count of entries, and
// again if the namespace turns out to need more keys: the second arena replaces the first
// whole (file, table, ring, allocation), and readers of the new size find what it admits.
TEST_F(NodeCacheTest, CreatingAgainReplacesTheArenaWhole) {
  NodeCache c;
  ASSERT_TRUE(c.Create(path_, 100, 1 << 20).ok());
  ASSERT_TRUE(c.AllocateUpTo(64 << 10).ok());
  ASSERT_TRUE(c.Admit(7, Bytes(7, 1000).data(), 1000).ok());
  ASSERT_TRUE(c.Create(path_, 120, 1 << 16).ok());
  EXPECT_EQ(c.entries(), 120u);
  EXPECT_EQ(c.data_bytes(), 1u << 16);
  EXPECT_EQ(c.used_bytes(), 0u);
  EXPECT_EQ(c.preallocated_bytes(), 0u);
  EXPECT_FALSE(c.Contains(7));
  Reader more_keys;  // (one that needs fewer keys than the table has may attach: pieces)
  EXPECT_FALSE(more_keys.Open(path_, 121));
  ASSERT_TRUE(c.Admit(110, Bytes(110, 3000).data(), 3000).ok());
  Reader r;
  ASSERT_TRUE(r.Open(path_, 120));
  std::vector<uint8_t> got;
  ASSERT_TRUE(r.Get(110, 3000, &got));
  EXPECT_EQ(got, Bytes(110, 3000));
  EXPECT_FALSE(r.Get(7, 1000, &got));
}

TEST_F(NodeCacheTest, AReaderRefusesAnArenaOfAnotherNamespaceOrCut) {
  NodeCache c;
  ASSERT_TRUE(c.Create(path_, 100, 1 << 16).ok());
  Reader r;
  EXPECT_FALSE(r.Open(path_, 101));
  std::vector<uint8_t> file(8192, 0);
  const int fd = ::open(path_.c_str(), O_RDONLY);
  ASSERT_EQ(::pread(fd, file.data(), file.size(), 0), 8192);
  ::close(fd);
  ArenaView v;
  EXPECT_FALSE(v.Attach(file.data(), file.size(), nullptr, 100));  // shorter than it says
  file[0] = 'X';
  EXPECT_FALSE(v.Attach(file.data(), file.size(), nullptr, 100));
  // A whole file whose data size wraps round 2^64 to look consistent: its data area would
  // reach far past the mapping.
  std::vector<uint8_t> whole;
  const int fd2 = ::open(path_.c_str(), O_RDONLY);
  struct stat st;
  ASSERT_EQ(::fstat(fd2, &st), 0);
  whole.resize(static_cast<size_t>(st.st_size));
  ASSERT_EQ(::pread(fd2, whole.data(), whole.size(), 0), st.st_size);
  ::close(fd2);
  ASSERT_TRUE(v.Attach(whole.data(), whole.size(), nullptr, 100));
  // A table longer than the namespace (room for pieces, io/pieces.h) is taken; a shorter one not.
  EXPECT_TRUE(v.Attach(whole.data(), whole.size(), nullptr, 60));
  EXPECT_FALSE(v.Attach(whole.data(), whole.size(), nullptr, 101));
  ArenaHeader h;
  std::memcpy(&h, whole.data(), sizeof h);
  h.data_bytes += uint64_t{1} << 63;
  h.data_offset += uint64_t{1} << 63;
  std::memcpy(whole.data(), &h, sizeof h);
  EXPECT_FALSE(v.Attach(whole.data(), whole.size(), nullptr, 100));
}

TEST_F(NodeCacheTest, MembersFetchedAheadAreCountedAsReadOrWastedWhenTheyLeave) {
  NodeCache c;
  ASSERT_TRUE(c.Create(path_, 1000, 64 << 10).ok());  // 16 members of 4000 B
  Reader r;
  ASSERT_TRUE(r.Open(path_, 1000));
  // 0-3 asked for, 4-15 fetched ahead; a reader reads 4-7 of those.
  for (uint32_t e = 0; e < 16; ++e)
    ASSERT_TRUE(c.Admit(e, Bytes(e, 4000).data(), 4000, e >= 4).ok());
  std::vector<uint8_t> got;
  for (uint32_t e = 4; e < 8; ++e) ASSERT_TRUE(r.Get(e, 4000, &got));
  EXPECT_EQ(c.ahead_used() + c.ahead_wasted(), 0u);  // nothing has left yet
  // 16 more members push every one of the first out (4-7 by way of their second chance).
  for (uint32_t e = 100; e < 116; ++e) ASSERT_TRUE(c.Admit(e, Bytes(e, 4000).data(), 4000).ok());
  EXPECT_EQ(c.ahead_used(), 4u);
  EXPECT_EQ(c.ahead_wasted(), 8u);
  // A second chance re-admits a member as asked for: it is not counted again.
  for (uint32_t e = 200; e < 240; ++e) ASSERT_TRUE(c.Admit(e, Bytes(e, 4000).data(), 4000).ok());
  EXPECT_EQ(c.ahead_used(), 4u);
  EXPECT_EQ(c.ahead_wasted(), 8u);
}

TEST_F(NodeCacheTest, PagesArePreallocatedAheadOfTheHeadInStepsAndHoldWhatIsAdmitted) {
  NodeCache c;
  ASSERT_TRUE(c.Create(path_, 100, 4 << 20).ok());  // members up to 512 KiB
  auto blocks = [&] {
    struct stat st;
    return ::stat(path_.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_blocks) * 512 : 0;
  };
  const uint64_t before = blocks();
  ASSERT_TRUE(c.Preallocate(1 << 20, 256 << 10));
  EXPECT_EQ(c.preallocated_bytes(), 256u << 10);  // one step per call
  int calls = 1;
  while (c.Preallocate(1 << 20, 256 << 10)) ++calls;
  EXPECT_EQ(calls, 4);
  EXPECT_EQ(c.preallocated_bytes(), 1u << 20);  // no further than `ahead` past the head
  EXPECT_GE(blocks() - before, 1u << 20);       // the file system has the pages
  // Members written over preallocated pages and past them read back exactly.
  Reader r;
  ASSERT_TRUE(r.Open(path_, 100));
  for (uint32_t e = 0; e < 10; ++e) ASSERT_TRUE(c.Admit(e, Bytes(e, 200000).data(), 200000).ok());
  std::vector<uint8_t> got;
  for (uint32_t e = 0; e < 10; ++e) {
    ASSERT_TRUE(r.Get(e, 200000, &got)) << e;
    EXPECT_EQ(got, Bytes(e, 200000)) << e;
  }
  // The head moved 2,000,000 bytes: preallocation follows it, and stops at the data area's end.
  EXPECT_GE(c.preallocated_bytes(), 2000000u);
  ASSERT_TRUE(c.Preallocate(1 << 20, 4 << 20));
  EXPECT_GE(c.preallocated_bytes(), 2000000u + (1 << 20));
  EXPECT_LT(c.preallocated_bytes(), 2000000u + (1 << 20) + 4096);
  while (c.Preallocate(64 << 20, 64 << 20)) {
  }
  EXPECT_EQ(c.preallocated_bytes(), 4u << 20);
  EXPECT_FALSE(c.Preallocate(64 << 20, 64 << 20));
}

TEST_F(NodeCacheTest, AllocateUpToAllocatesTheFirstLapAtOnceBoundedByTheRing) {
  NodeCache c;
  ASSERT_TRUE(c.Create(path_, 100, 4 << 20).ok());
  auto blocks = [&] {
    struct stat st;
    return ::stat(path_.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_blocks) * 512 : 0;
  };
  const uint64_t before = blocks();
  ASSERT_TRUE(c.AllocateUpTo((1 << 20) + 1).ok());
  EXPECT_EQ(c.preallocated_bytes(), (1u << 20) + 4096);  // whole pages
  EXPECT_GE(blocks() - before, (1u << 20) + 4096);
  ASSERT_TRUE(c.AllocateUpTo(1000).ok());  // less than there is: nothing to do
  EXPECT_EQ(c.preallocated_bytes(), (1u << 20) + 4096);
  ASSERT_TRUE(c.AllocateUpTo(1ull << 40).ok());  // never past the ring
  EXPECT_EQ(c.preallocated_bytes(), 4u << 20);
  EXPECT_GE(blocks() - before, 4u << 20);
  EXPECT_FALSE(c.Preallocate(1 << 20, 1 << 20));  // nothing left to allocate
  Reader r;
  ASSERT_TRUE(r.Open(path_, 100));
  std::vector<uint8_t> got;
  for (uint32_t e = 0; e < 30; ++e) ASSERT_TRUE(c.Admit(e, Bytes(e, 300000).data(), 300000).ok());
  for (uint32_t e = 30 - 13; e < 30; ++e) {  // (the ring holds 13 of them)
    ASSERT_TRUE(r.Get(e, 300000, &got)) << e;
    EXPECT_EQ(got, Bytes(e, 300000)) << e;
  }
}

TEST_F(NodeCacheTest, OldestMembersAreEvictedFirst) {
  NodeCache c;
  ASSERT_TRUE(c.Create(path_, 1000, 64 << 10).ok());  // 64 KiB: 16 members of 4000 B
  Reader r;
  ASSERT_TRUE(r.Open(path_, 1000));
  for (uint32_t e = 0; e < 40; ++e) ASSERT_TRUE(c.Admit(e, Bytes(e, 4000).data(), 4000).ok());
  EXPECT_EQ(c.evictions(), 24u);
  EXPECT_LE(c.used_bytes(), 64u << 10);
  std::vector<uint8_t> got;
  for (uint32_t e = 0; e < 40; ++e) {
    const bool cached = r.Get(e, 4000, &got);
    EXPECT_EQ(cached, e >= 24) << e;
    if (cached) {
      EXPECT_EQ(got, Bytes(e, 4000)) << e;
    }
  }
}

TEST_F(NodeCacheTest, AMemberReadSinceAdmissionGetsASecondChance) {
  NodeCache c;
  ASSERT_TRUE(c.Create(path_, 1000, 64 << 10).ok());
  Reader r;
  ASSERT_TRUE(r.Open(path_, 1000));
  for (uint32_t e = 0; e < 16; ++e) ASSERT_TRUE(c.Admit(e, Bytes(e, 4000).data(), 4000).ok());
  std::vector<uint8_t> got;
  ASSERT_TRUE(r.Get(0, 4000, &got));  // read: flagged
  for (uint32_t e = 16; e < 20; ++e) ASSERT_TRUE(c.Admit(e, Bytes(e, 4000).data(), 4000).ok());
  EXPECT_EQ(c.second_chances(), 1u);
  ASSERT_TRUE(c.Read(0, 4000, &got)) << "the member read was evicted";  // (the agent's read
  EXPECT_EQ(got, Bytes(0, 4000));                                       // sets no flag)
  EXPECT_FALSE(r.Get(1, 4000, &got));  // the unread ones after it went in its place
  EXPECT_FALSE(r.Get(4, 4000, &got));
  EXPECT_TRUE(r.Get(5, 4000, &got));
  // Without another read, its chance is spent: a full lap later it is gone.
  for (uint32_t e = 20; e < 40; ++e) ASSERT_TRUE(c.Admit(e, Bytes(e, 4000).data(), 4000).ok());
  EXPECT_FALSE(r.Get(0, 4000, &got));
}

TEST_F(NodeCacheTest, ACopyOverlappingAnEvictionIsNotTakenForTheMember) {
  NodeCache c;
  ASSERT_TRUE(c.Create(path_, 1000, 64 << 10).ok());
  Reader r;
  ASSERT_TRUE(r.Open(path_, 1000));
  ASSERT_TRUE(c.Admit(3, Bytes(3, 4000).data(), 4000).ok());
  const uint8_t* p = nullptr;
  const uint64_t w = r.view.Find(3, 4000, &p);
  ASSERT_NE(w, 0u);
  // The agent evicts it (unread flags are cleared by a full lap) and reuses its bytes.
  __atomic_store_n(&r.refs[3], 0, __ATOMIC_RELAXED);
  for (uint32_t e = 100; e < 120; ++e) ASSERT_TRUE(c.Admit(e, Bytes(e, 4000).data(), 4000).ok());
  EXPECT_FALSE(r.view.Still(3, w));
  // Admitted again, possibly at the same place: a new word all the same.
  ASSERT_TRUE(c.Admit(3, Bytes(3, 4000).data(), 4000).ok());
  EXPECT_FALSE(r.view.Still(3, w));
}

// One thread admits members of varied sizes without pause (evicting all the time) while
// another reads random members through its own mapping: every copy the seqlock accepts
// must be exactly that member's bytes.
TEST_F(NodeCacheTest, ConcurrentReadersNeverAcceptWrongBytes) {
  constexpr uint32_t kEntries = 400;
  NodeCache c;
  ASSERT_TRUE(c.Create(path_, kEntries, 256 << 10).ok());
  Reader r;
  ASSERT_TRUE(r.Open(path_, kEntries));
  auto len_of = [](uint32_t e) { return static_cast<size_t>(64 + (e * 2654435761u) % 30000); };
  std::atomic<bool> done{false};
  std::thread writer([&] {
    std::mt19937 rnd(1);
    for (int i = 0; i < 60000; ++i) {
      const uint32_t e = rnd() % kEntries;
      if (!c.Contains(e)) {
        ASSERT_TRUE(c.Admit(e, Bytes(e, len_of(e)).data(), len_of(e)).ok());
      }
    }
    done = true;
  });
  std::mt19937 rnd(2);
  uint64_t accepted = 0, refused = 0;
  std::vector<uint8_t> got;
  while (!done) {
    const uint32_t e = rnd() % kEntries;
    if (r.Get(e, len_of(e), &got, true)) {
      ++accepted;
      ASSERT_EQ(got, Bytes(e, len_of(e))) << "member " << e;
    } else {
      ++refused;
    }
  }
  writer.join();
  EXPECT_GT(accepted, 0u);
  EXPECT_GT(c.evictions(), 1000u);
  std::printf("accepted %llu copies, refused %llu, %llu evictions, %llu second chances\n",
              static_cast<unsigned long long>(accepted), static_cast<unsigned long long>(refused),
              static_cast<unsigned long long>(c.evictions()),
              static_cast<unsigned long long>(c.second_chances()));
}

}  // namespace
}  // namespace fanstore::io
