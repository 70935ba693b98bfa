// What the runtime's prefilter (prefilter.cc, compiled with -mgeneral-regs-only) reads:
// plain globals only, set at start-up and updated with single stores.
// Thread-safety: written by Init and the cwd/fd-table updates; read lock-free.
#pragma once

#include <atomic>
#include <cstdint>

namespace fanstore::runtime {

struct PrefilterState {
  bool active = false;
  char mount[4096] = {};
  unsigned mount_len = 0;
  int reserved_lo = 0;
  const std::atomic<uint64_t>* fd_bits = nullptr;  // FdTable::bits(), kMaxFds bits
  std::atomic<int> cwd_virtual{1};                 // 1: relative paths may be ours
};
extern PrefilterState g_prefilter;

int RuntimePrefilter(long nr, const long a[6]) noexcept;

}  // namespace fanstore::runtime
