#include "runtime/data/verified.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <new>

namespace fanstore::runtime {

namespace {

std::atomic<uint64_t>* g_bits = nullptr;
uint64_t g_entries = 0;
bool g_shared = false;

// The members with block checksums and their blocks' marks.
struct BlockMarks {
  const uint64_t* index = nullptr;  // `entry << 32 | first`, in entry order
  uint64_t indexed = 0;
  std::atomic<uint64_t>* bits = nullptr;
  uint64_t blocks = 0;  // bits there
};
std::atomic<const BlockMarks*> g_blocks{nullptr};
const meta::NamespaceView* g_ns = nullptr;  // for the private marks, made at first use

void* MapShared(const std::string& path, uint64_t entries, BlockMarks* blocks) {
  VerifiedLayout l;
  l.entries = entries;
  const int fd = ::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return nullptr;
  struct stat st;
  void* m = MAP_FAILED;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() &&
      !(st.st_mode & 022) && static_cast<uint64_t>(st.st_size) >= l.index_off() + 8)
    m = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (m == MAP_FAILED) return nullptr;
  auto* base = static_cast<uint8_t*>(m);
  const uint64_t bytes = static_cast<uint64_t>(st.st_size);
  l.indexed = *reinterpret_cast<const uint64_t*>(base + l.index_off());
  if (l.indexed > (bytes - l.index_off() - 8) / 8) {  // not a layout of ours: no block marks
    ::munmap(m, bytes);
    return nullptr;
  }
  blocks->index = reinterpret_cast<const uint64_t*>(base + l.index_off() + 8);
  blocks->indexed = l.indexed;
  blocks->bits = reinterpret_cast<std::atomic<uint64_t>*>(base + l.bits_off());
  blocks->blocks = (bytes - l.bits_off()) / 8 * 64;
  return m;
}

// Private block marks for `ns` (two passes over its entries, once per process, only where
// the node's file is missing and a member with block checksums is read).
const BlockMarks* MakePrivateBlocks(const meta::NamespaceView& ns) {
  const VerifiedLayout l = ForEachBlockedMember(ns, [](uint32_t, uint64_t) {});
  const uint64_t bytes = sizeof(BlockMarks) + 8 * l.indexed + VerifiedBytes(l.blocks);
  void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  auto* marks = new (m) BlockMarks;
  auto* index = reinterpret_cast<uint64_t*>(marks + 1);
  uint64_t k = 0;
  ForEachBlockedMember(ns,
                       [&](uint32_t e, uint64_t first) { index[k++] = uint64_t{e} << 32 | first; });
  marks->index = index;
  marks->indexed = l.indexed;
  marks->bits = reinterpret_cast<std::atomic<uint64_t>*>(index + l.indexed);
  marks->blocks = l.blocks;
  const BlockMarks* none = nullptr;
  if (!g_blocks.compare_exchange_strong(none, marks, std::memory_order_acq_rel)) {
    ::munmap(m, bytes);  // another thread made them first
    return none;
  }
  return marks;
}

// The bit of block `block` of `entry`, or UINT64_MAX when it has none.
uint64_t BlockBit(uint32_t entry, uint64_t block) {
  const BlockMarks* b = g_blocks.load(std::memory_order_acquire);
  if (!b && g_ns) b = MakePrivateBlocks(*g_ns);
  if (!b) return UINT64_MAX;
  uint64_t lo = 0, hi = b->indexed;
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if ((b->index[mid] >> 32) < entry)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == b->indexed || (b->index[lo] >> 32) != entry) return UINT64_MAX;
  const uint64_t first = b->index[lo] & 0xffffffffu;
  const uint64_t end = lo + 1 < b->indexed ? b->index[lo + 1] & 0xffffffffu : b->blocks;
  return first + block < end && first + block < b->blocks ? first + block : UINT64_MAX;
}

}  // namespace

void AttachVerified(const std::string& path, const meta::NamespaceView& ns) {
  const uint64_t bytes = VerifiedBytes(ns.size());
  if (bytes == 0) return;
  static BlockMarks shared_blocks;
  void* shared = path.empty() ? nullptr : MapShared(path, ns.size(), &shared_blocks);
  g_shared = shared != nullptr;
  auto* bits = static_cast<std::atomic<uint64_t>*>(shared);
  if (!bits) {  // (zero pages: only the words of members read are ever touched)
    void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return;  // every read then checks its member
    bits = static_cast<std::atomic<uint64_t>*>(m);
    g_ns = &ns;
  } else {
    g_blocks.store(&shared_blocks, std::memory_order_release);
  }
  g_entries = ns.size();
  g_bits = bits;
}

bool IsVerified(uint32_t entry) {
  return entry < g_entries &&
         (g_bits[entry / 64].load(std::memory_order_relaxed) >> (entry % 64) & 1) != 0;
}

void MarkVerified(uint32_t entry) {
  if (entry < g_entries)
    g_bits[entry / 64].fetch_or(uint64_t{1} << (entry % 64), std::memory_order_relaxed);
}

bool IsBlockVerified(uint32_t entry, uint64_t block) {
  const uint64_t bit = BlockBit(entry, block);
  if (bit == UINT64_MAX) return false;
  const BlockMarks* b = g_blocks.load(std::memory_order_relaxed);
  return (b->bits[bit / 64].load(std::memory_order_relaxed) >> (bit % 64) & 1) != 0;
}

void MarkBlockVerified(uint32_t entry, uint64_t block) {
  const uint64_t bit = BlockBit(entry, block);
  if (bit == UINT64_MAX) return;
  const BlockMarks* b = g_blocks.load(std::memory_order_relaxed);
  b->bits[bit / 64].fetch_or(uint64_t{1} << (bit % 64), std::memory_order_relaxed);
}

bool VerifiedShared() {
  return g_shared;
}

}  // namespace fanstore::runtime
