// The node cache: members fetched from other nodes, kept in one shared arena file per node
// (<cache dir>/arena) that the node agent writes and every application process of the node
// maps read-only. A hit costs no system call and no message: a process looks the member up
// in the arena's table, copies its bytes out of the mapping and checks that the table still
// names the same bytes (a seqlock per member). Only a miss goes to the agent.
//
// File layout (native endianness: it never leaves the node):
//   [0, 64)                ArenaHeader
//   [table_offset, ...)    one 64-bit descriptor word per namespace entry: 0 = not cached,
//                          else (generation << 40) | (offset in the data area / 64)
//   [refs_offset, ...)     one byte per entry, set by readers on a hit ("used since it was
//                          admitted": the second chance of the eviction), page-aligned so
//                          that readers map only this part writable
//   [data_offset, + data_bytes)  the members' stored bytes, each 64-byte aligned, written
//                          as a ring in admission order
//
// Eviction: the ring is a FIFO with a second chance (CLOCK, the usual approximation of
// LRU): a member about to be overwritten that was read since it was admitted is copied to
// the head instead, once. The agent clears a member's word before its bytes are overwritten
// and publishes the new word only after the new bytes are complete, so a reader that finds
// the same word before and after its copy has copied exactly that member's bytes.
// Thread-safety: ArenaView is read-only (any thread, any process); NodeCache belongs to the
// agent's loop thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "base/status.h"

namespace fanstore::io {

inline constexpr char kArenaMagic[8] = {'F', 'S', 'A', 'R', 'E', 'N', 'A', '1'};
inline constexpr uint32_t kArenaVersion = 1;
inline constexpr uint64_t kArenaAlign = 64;
inline constexpr int kArenaOffsetBits = 40;  // offsets / 64: up to 64 TiB of data

// The most ring bytes `members` members of `stored` bytes in all take (each is rounded up
// to kArenaAlign).
inline uint64_t ArenaBytesAtMost(uint64_t members, uint64_t stored) {
  return stored + members * (kArenaAlign - 1);
}

struct ArenaHeader {
  char magic[8];
  uint32_t version;
  uint32_t entries;  // namespace entries: the table's length
  uint64_t table_offset, refs_offset, data_offset, data_bytes;
  uint64_t file_bytes;
  uint64_t reserved;
};
static_assert(sizeof(ArenaHeader) == 64);

inline uint64_t ArenaDataOffset(uint64_t word) {
  return (word & ((uint64_t{1} << kArenaOffsetBits) - 1)) * kArenaAlign;
}

// A process's view of an arena mapping. Attach checks the header against the mapping and the
// namespace (a stale or foreign file is refused, never read past its end).
class ArenaView {
 public:
  // `map` is the whole file mapped read-only, `refs` its refs part mapped writable (may be
  // nullptr: hits are then not recorded). `entries`: the keys the process will look up (the
  // namespace's entries, then the pieces of large members: io/pieces.h); the table may be
  // longer (the agent sizes it for a bound of the pieces before it has the namespace).
  bool Attach(const uint8_t* map, uint64_t map_bytes, uint8_t* refs, uint64_t entries) {
    ArenaHeader h;
    if (!map || map_bytes < sizeof h) return false;
    std::memcpy(&h, map, sizeof h);
    if (std::memcmp(h.magic, kArenaMagic, sizeof h.magic) != 0 || h.version != kArenaVersion ||
        h.entries < entries || h.file_bytes != map_bytes || h.table_offset % 8 != 0 ||
        h.table_offset < sizeof h || h.refs_offset > map_bytes || h.data_offset > map_bytes ||
        h.table_offset + uint64_t{h.entries} * 8 > h.refs_offset ||
        h.refs_offset + h.entries > h.data_offset ||
        h.data_bytes != map_bytes - h.data_offset)  // (each sum above is of bounded terms)
      return false;
    table_ = reinterpret_cast<const uint64_t*>(map + h.table_offset);
    data_ = map + h.data_offset;
    data_bytes_ = h.data_bytes;
    refs_ = refs;
    entries_ = h.entries;
    return true;
  }
  bool attached() const { return table_ != nullptr; }
  uint64_t data_bytes() const { return data_bytes_; }

  // The member's bytes if it is cached with `len` bytes: returns its word (0 = not cached)
  // and sets *bytes. Copy them out, then ask Still(entry, word) before using the copy.
  uint64_t Find(uint32_t entry, uint64_t len, const uint8_t** bytes) const {
    if (entry >= entries_) return 0;
    const uint64_t w = __atomic_load_n(&table_[entry], __ATOMIC_ACQUIRE);
    if (w == 0) return 0;
    const uint64_t off = ArenaDataOffset(w);
    if (off > data_bytes_ || len > data_bytes_ - off) return 0;
    *bytes = data_ + off;
    if (refs_ && __atomic_load_n(&refs_[entry], __ATOMIC_RELAXED) == 0)
      __atomic_store_n(&refs_[entry], 1, __ATOMIC_RELAXED);
    return w;
  }
  // True when the bytes read since Find(entry) returned `word` were the member's throughout.
  bool Still(uint32_t entry, uint64_t word) const {
#if defined(__x86_64__)
    // x86-64 keeps loads in program order: only the compiler must not move the copy's loads
    // past this one (and ThreadSanitizer does not accept a fence).
    __asm__ __volatile__("" ::: "memory");
#else
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
#endif
    return __atomic_load_n(&table_[entry], __ATOMIC_RELAXED) == word;
  }

 private:
  const uint64_t* table_ = nullptr;
  const uint8_t* data_ = nullptr;
  uint8_t* refs_ = nullptr;
  uint64_t data_bytes_ = 0;
  uint32_t entries_ = 0;
};

// The agent's side: creates the arena, admits members, evicts.
class NodeCache {
 public:
  NodeCache() = default;
  ~NodeCache();
  NodeCache(const NodeCache&) = delete;
  NodeCache& operator=(const NodeCache&) = delete;

  // Creates (replacing the file, and any arena made before) the arena file at `path` for
  // `entries` namespace entries and `data_bytes` of members. The header, table and refs
  // are allocated at once (not attempted when the file system reports too little room), so
  // a full local disk is an error here. Member bytes are copied through a mapping only where the
  // file's pages exist (allocated ahead, or written before), elsewhere written with pwrite,
  // so a full disk later is an error of that admission, never a SIGBUS.
  Status Create(const std::string& path, uint32_t entries, uint64_t data_bytes);

  // Members larger than this are not kept (they would evict too much): the agent hands
  // them out as private copies.
  uint64_t max_member() const { return data_bytes_ / 8; }
  uint64_t data_bytes() const { return data_bytes_; }
  uint32_t entries() const { return entries_; }
  bool Contains(uint32_t entry) const {
    return entry < entries_ && __atomic_load_n(&table_[entry], __ATOMIC_RELAXED) != 0;
  }
  // Copies a member's stored bytes into the arena and publishes them, evicting the oldest
  // members (those read since their admission get one second chance). len <= max_member().
  // `ahead`: nobody asked for it yet (fetched with a neighbour); whether it is read before it
  // is evicted is counted, so the agent can tell when fetching ahead only wastes the cache.
  Status Admit(uint32_t entry, const uint8_t* bytes, uint64_t len, bool ahead = false);
  // Allocates the ring's pages up to `ahead` bytes past the head before they are written,
  // at most `step` bytes per call: tmpfs allocates a page when it is first written, and on
  // the first lap that was over half of what an admission cost (perf: 11 of 20% of the
  // agent's time in pwrite). The agent calls this while it waits for replies instead of
  // spinning. True when it allocated something; false when there is nothing to do (the
  // first lap's pages are all there) or allocation failed (then admissions allocate as
  // before and report a full disk themselves).
  bool Preallocate(uint64_t ahead, uint64_t step);
  // Allocates the first lap's pages for the first `bytes` of the ring at once (at most the
  // whole ring), before anything is admitted: the agent calls it at start with what the
  // node may fetch, so a job's first epoch does not allocate the cache page by page while
  // it reads. An error (a full disk) leaves the ring as it was: admissions then allocate
  // as they go and report a full disk themselves.
  Status AllocateUpTo(uint64_t bytes);
  uint64_t preallocated_bytes() const { return allocated_; }
  // Reads a cached member's bytes (for a private copy). False if it is not cached.
  bool Read(uint32_t entry, uint64_t len, std::vector<uint8_t>* out) const;

  uint64_t evictions() const { return evictions_; }
  uint64_t second_chances() const { return second_chances_; }
  uint64_t used_bytes() const { return used_; }
  // Members admitted `ahead` that left the ring unread, and those read before they left.
  uint64_t ahead_wasted() const { return ahead_wasted_; }
  uint64_t ahead_used() const { return ahead_used_; }

 private:
  struct Slot {
    uint32_t entry;
    uint64_t off, len;  // len: bytes reserved (64-byte multiple)
    uint64_t bytes;     // the member's stored bytes
    bool ahead;         // admitted before anyone asked for it
  };
  void Close();  // back to a NodeCache that was never created
  // Frees the ring from head_ for `need` bytes; members read since admission are queued in
  // `again` with their bytes.
  void MakeRoom(uint64_t need, std::vector<std::pair<uint32_t, std::vector<uint8_t>>>* again);
  void EvictFront(std::vector<std::pair<uint32_t, std::vector<uint8_t>>>* again);
  Status Place(uint32_t entry, const uint8_t* bytes, uint64_t len, bool ahead,
               std::vector<std::pair<uint32_t, std::vector<uint8_t>>>* again);

  int fd_ = -1;
  uint8_t* meta_ = nullptr;  // header + table + refs, mapped writable
  uint64_t meta_bytes_ = 0;
  uint64_t* table_ = nullptr;
  uint8_t* refs_ = nullptr;
  uint8_t* data_ = nullptr;  // the data area, mapped writable (nullptr: pwrite only)
  bool in_memory_ = false;   // the file is on tmpfs
  uint32_t entries_ = 0;
  uint64_t data_offset_ = 0, data_bytes_ = 0;
  uint64_t head_ = 0, used_ = 0, generation_ = 0;
  uint64_t allocated_ = 0;  // [0, allocated_) of the data area has pages (first lap)
  bool allocate_failed_ = false;
  std::deque<Slot> ring_;  // admission order: front = oldest
  uint64_t evictions_ = 0, second_chances_ = 0, ahead_wasted_ = 0, ahead_used_ = 0;
};

}  // namespace fanstore::io
