// Monotonic time in nanoseconds, for deadlines and patience (io::LandingPatience, the
// runtime's rechecks). Both read the vDSO, no system call, so they are safe in the
// runtime's hooks; the coarse one is cheaper still, at a tick's resolution (1-4 ms).
// Thread-safety: pure reads of the kernel's clocks.
#pragma once

#include <time.h>

#include <cstdint>

namespace fanstore::base {

inline int64_t ClockNs(clockid_t clock) {
  timespec t;
  clock_gettime(clock, &t);
  return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}
inline int64_t MonotonicNs() {
  return ClockNs(CLOCK_MONOTONIC);
}
inline int64_t CoarseMonotonicNs() {
  return ClockNs(CLOCK_MONOTONIC_COARSE);
}

}  // namespace fanstore::base
