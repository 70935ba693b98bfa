// Warming a blob served in place: its bytes read into the page cache in 2 MiB folios, in
// order, while CMD runs. A warm epoch reads each member with one kernel copy out of the
// page cache, and that copy costs less from one 2 MiB folio than from the 4-64 KiB folios
// that reads in a random order leave (docs/design.md). The kernel makes 2 MiB folios for
// readahead into a mapping marked MADV_HUGEPAGE (file systems with large folios: ext4 and
// XFS on Linux 6.x; others get what they support), so the blob is mapped so marked and
// faulted in with MADV_POPULATE_READ (Linux 5.14+), 8 MiB at a time. Pages already cached
// stay as they are. Nothing is read where the kernel has neither call.
// Thread-safety: any thread; one call per blob.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace fanstore::io {

struct WarmResult {
  uint64_t bytes = 0;     // of the blob, walked
  bool supported = true;  // false: the kernel has no MADV_POPULATE_READ (nothing was read)
};

// Warms the blob at `path` (read-only), stopping soon after *cancel turns true.
Result<WarmResult> WarmHuge(const std::string& path, const std::atomic<bool>* cancel);

}  // namespace fanstore::io
