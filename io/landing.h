// The landing map: while one node copies its partitions to local storage as CMD runs, which
// 2 MiB chunks of each partition have landed (readers read those at once: from DATA's page
// cache where the copier fetches first, else from the copy) and which ones readers wait for
// (the copier takes those next). A small file in the rank's directory
// under /dev/shm, mapped shared by fanrun's copier and every served process; a reader waits
// on a partition's landing count with a futex.
//
// Layout (64-bit words): magic, partition count, whether the copier is at work, the chunk
// size, the want count (low 32 bits, the futex word the copier's urgent stream sleeps on),
// where landed chunks are read (1: DATA, 0: the copy); per partition 4 words: the landing count
// (low 32 bits, the futex word) and the state (high 32), chunks, the word of its landed
// bits, the word of its wanted bits; then the bits.
// Thread-safety: every operation is atomic on the shared words; Create and Close are the
// owner's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace fanstore::io {

// The chunk: one huge page, made one by the copier before its bytes land (io/stage.h).
inline constexpr uint64_t kLandingChunk = 2 << 20;
// How long a read (a served process's, or another node's request to this node's agent) waits
// for chunks it asked for while the copier lands nothing at all, before it reads DATA itself:
// a copy that still lands chunks is waited for (LandingPatience), one silent this long is stuck.
inline constexpr int64_t kLandingWaitNs = 2'000'000'000;

// The map fanrun makes beside `image_path` (the namespace image).
inline std::string LandingPathBeside(const std::string& image_path) {
  return image_path.substr(0, image_path.rfind('/') + 1) + "landing";
}

// A partition's copy: being made, complete and checked (renamed to its final name), or given
// up (read where it is).
enum class LandingState : uint32_t { kCopying = 0, kDone = 1, kFailed = 2 };

class LandingMap {
 public:
  LandingMap() = default;
  // Makes the file at `path` for partitions of these sizes (0: not copied) in chunks of
  // `chunk` bytes (a power of two, 64 KiB to 64 MiB) and maps it.
  static Result<LandingMap> Create(const std::string& path, const std::vector<uint64_t>& sizes,
                                   uint64_t chunk = kLandingChunk);
  // Maps an existing file; !valid() when there is none or it is not a landing map.
  static LandingMap Attach(const std::string& path);
  void Close();

  bool valid() const { return words_ != nullptr; }
  uint32_t parts() const { return valid() ? static_cast<uint32_t>(words_[1]) : 0; }
  uint64_t chunks(uint32_t p) const { return p < parts() ? Slot(p)[1] : 0; }
  uint64_t chunk_bytes() const { return valid() ? words_[3] : kLandingChunk; }

  bool Landed(uint32_t p, uint64_t chunk) const { return Bit(Slot(p)[2], chunk); }
  // Whether every chunk of [off, off + len) has landed.
  bool RangeLanded(uint32_t p, uint64_t off, uint64_t len) const;
  // Marks the chunks of [off, off + len) not landed yet as wanted, and wakes the copier's
  // urgent stream if that is news.
  void Want(uint32_t p, uint64_t off, uint64_t len);
  // The want count, and a sleep until it is no longer `seen` or `timeout_ns` has passed (the
  // copier's side); Nudge wakes such a sleeper with nothing new wanted.
  uint32_t WantCount() const;
  void WaitForWant(uint32_t seen, int64_t timeout_ns) const;
  void Nudge();
  // The first chunk from `from` on wanted, not landed and not in `issued` (one bit per
  // chunk), or -1.
  int64_t NextWanted(uint32_t p, const std::vector<uint64_t>& issued, uint64_t from = 0) const;

  // Marks `chunk` landed and wakes the partition's waiters.
  void Land(uint32_t p, uint64_t chunk);
  LandingState State(uint32_t p) const;
  void SetState(uint32_t p, LandingState s);  // wakes the waiters
  uint32_t Count(uint32_t p) const;           // the landing count
  // Every partition's landing count, summed: it moves whenever a chunk lands or a copy ends.
  uint64_t Progress() const;
  // Whether the copier is at work: readers ask for chunks and wait only then (it starts once
  // CMD runs, and stops at the end of the copy, a failure or CMD's end); wakes every waiter.
  void SetCopying(bool on);
  bool Copying() const;
  // Where landed chunks are: in DATA's page cache (read DATA), or in the copy. The copier's
  // to set, before anything lands.
  void SetFromData(bool on);
  bool FromData() const;
  // Sleeps until the landing count is no longer `seen`, or `timeout_ns`.
  void Wait(uint32_t p, uint32_t seen, int64_t timeout_ns) const;

 private:
  static constexpr uint64_t kHead = 6;  // magic, partitions, copying, chunk, wants, from DATA
  uint64_t* Slot(uint32_t p) const { return words_ + kHead + 4 * static_cast<size_t>(p); }
  bool Bit(uint64_t first_word, uint64_t i) const;
  void Wake(uint32_t p) const;

  uint64_t* words_ = nullptr;
  size_t bytes_ = 0;
};

// A reader's patience with the copier: it gives up only once no chunk of any partition has
// landed (nor any copy ended) for `stuck_ns`. A reader that gives up reads DATA itself, a
// small read beside the copier's stream, which on MooseFS made the client fetch more than it
// was asked for; a copy that keeps landing, slowed by a busy node, takes the wanted chunks
// next or reaches them in order soon (io/stage.h), so it is worth the wait. Times are any
// monotonic clock's nanoseconds; `progress` is the map's Progress(), read by the caller (once
// for all its waiters).
class LandingPatience {
 public:
  LandingPatience(uint64_t progress, int64_t now_ns, int64_t stuck_ns = kLandingWaitNs)
      : stuck_ns_(stuck_ns), seen_(progress), since_(now_ns) {}
  // Whether nothing has landed for stuck_ns by `now_ns` (progress since resets it).
  bool Expired(int64_t now_ns, uint64_t progress) {
    if (progress != seen_) {
      seen_ = progress;
      since_ = now_ns;
    }
    return Left(now_ns) <= 0;
  }
  // How long until then, if nothing lands.
  int64_t Left(int64_t now_ns) const { return since_ + stuck_ns_ - now_ns; }

 private:
  int64_t stuck_ns_;
  uint64_t seen_;
  int64_t since_;
};

}  // namespace fanstore::io
