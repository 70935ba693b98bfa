// Stage-in: copies a partition blob from the shared file system to node-local storage as
// one sequential stream (a tmpfs copy read straight into its huge pages), then opens the copy and
// checks its header, footer, index checksum, its entry in the manifest and every raw
// member's CRC32C before anything is served from it. The copy is written under a
// temporary name and renamed last, so a failed stage-in never leaves a plausible-looking
// blob behind.
// Thread-safety: independent calls may run concurrently.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "io/landing.h"
#include "meta/manifest.h"
#include "meta/partition_reader.h"

namespace fanstore::io {

struct StageResult {
  uint64_t bytes = 0;
  double seconds = 0;
  // The copy is on tmpfs and the kernel made it huge pages (MADV_COLLAPSE); else
  // `small_pages_why` says why not ("" for a copy not on tmpfs or under 2 MiB).
  bool huge_pages = false;
  std::string small_pages_why;
};

// Copies `src` to `dst` and validates it as partition `id` of `manifest`. Errors name the
// file and the reason (e.g. "…/part-00003.fsb: No space left on device"). Setting *cancel
// (if given) stops the copy soon, with an error and nothing left at `dst`. `no_room` (if
// given) is set when the copy failed only because `dst`'s file system had no room for it
// (ENOSPC or EDQUOT: the source is fine and may be read where it is).
// "" when this kernel makes a shmem file huge pages on MADV_COLLAPSE, as a copy on tmpfs
// asks of its chunks (Linux 6.1+, shmem huge pages not `deny`), else why not: tried on a
// 2 MiB memfd (shmem, as /dev/shm is) holding one seed page, as a landing copy does. `fanrun
// doctor` says it; staging chooses by it.
std::string ShmemCollapseError();

Result<StageResult> StagePartition(const std::string& src, const std::string& dst,
                                   const meta::Manifest& manifest, uint32_t id,
                                   const std::atomic<bool>* cancel = nullptr,
                                   bool* no_room = nullptr);

// Reads every raw member of partition `r` (its blob at `path`) and checks it against its
// CRC32C, `threads` threads taking members in turn, 1 MiB reads each: for a share fetched into
// DATA's page cache before CMD (several nodes), checked there before anything is served.
// The first mismatch found is the error, named as StagePartition names it.
Status CheckMembersRead(const meta::PartitionReader& r, const std::string& path, int threads,
                        const std::atomic<bool>* cancel = nullptr);

// The copies one node makes while CMD runs, all at once, chunk by chunk (io/landing.h): each
// chunk is marked in `map` as it lands, so readers read it at once; chunks readers want go
// first, the rest in order. Where DATA's file system keeps what is read in the page cache,
// a chunk lands there (fetched: read once, the bytes dropped) and readers read it from DATA;
// once every chunk has, the copies are made from the page cache at the lowest CPU priority.
// Elsewhere each chunk lands in the copy. A partition whose copy is complete is checked and
// renamed as StagePartition does, and `landed` is called for it. On an error (named as
// StagePartition names it) every copy not finished is removed and marked kFailed, so that
// readers read those partitions where they are.
struct LandingCopy {
  uint32_t partition;
  std::string src, dst;
};
// Chunks readers wait for are fetched out of order only where the stream reading their
// partition in order is not expected, at the copy's pace so far, to reach them within
// `in_order_ns` (nor while the pace is measured: until 8 chunks land, 100 ms at most): each
// reader's wait is then about that long, while a reader gives up only on a copy that lands
// nothing for io::kLandingWaitNs. Reads out of order slowed the stream by 20-40% on MooseFS,
// and made its client fetch more than it was asked for: a 246 MB partition pulled 300-375
// MB in a third of first epochs, with one or two reads out of order, against 247 MB when
// every read came in order.
inline constexpr int64_t kInOrderNs = 1'500'000'000;
struct LandingOptions {
  int64_t in_order_ns = kInOrderNs;
  // Readers never wait for chunks (the map's Copying stays off): they read DATA where it is
  // until a partition's copy is complete (bin/stage_decision.h yield).
  bool readers_read_in_place = false;
  // (for tests)
  int chunk_delay_ms = 0;   // before each chunk is started
  int64_t fail_after = -1;  // chunks landed before the copy fails
  bool copy_first = false;  // land chunks in the copy even where DATA keeps pages cached
};
using LandedFn = std::function<void(const LandingCopy&, const StageResult&)>;
Status StageLanding(const std::vector<LandingCopy>& copies, const meta::Manifest& manifest,
                    LandingMap* map, const LandingOptions& opt, const std::atomic<bool>* cancel,
                    const LandedFn& landed);

}  // namespace fanstore::io
