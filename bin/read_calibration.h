// Whether the runtime should copy page-cached blob bytes out of a mapping of the blob
// (FANSTORE_MAPPED_READS=1) or read them with pread (0). The mapping skips the kernel's
// per-page copy loop, but a process pays a page fault for each region it maps first,
// and what a fault costs differs by machine: on bare metal a few hundred ns, in a guest
// with shadow page tables tens of us (measured: 16 k files/s mapped against 117 k read,
// docs/design.md). fanrun measures both on one of the job's blobs at start and chooses.
// Thread-safety: pure functions of their arguments (and the machine).
#pragma once

#include <optional>
#include <string>

namespace fanstore::fanrun {

// Costs of getting 64 KiB of page-cached blob bytes into a buffer, in ns.
struct ReadCost {
  double pread = 0;      // pread
  double map_first = 0;  // copy out of a fresh mapping (its page faults included)
  double map_again = 0;  // the same copy again (the pages mapped)
};

// Measures on up to 8 MiB at the start of `blob` (read first, so that it is cached);
// nullopt when the blob cannot be opened, mapped or is under 1 MiB.
std::optional<ReadCost> MeasureReadCost(const std::string& blob);

// Mapping pays when a region read twice by a process costs less mapped than read: its
// faults are repaid by one re-read's saving.
inline bool MappedReadsPay(const ReadCost& c) {
  return c.map_first + c.map_again < 2 * c.pread;
}

}  // namespace fanstore::fanrun
