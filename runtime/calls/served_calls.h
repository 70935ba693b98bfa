// The runtime's interest: every number of runtime/names/call_table.h (served and unserved),
// which the preload library patches libc for and `fanrun doctor` plans libc with, without
// linking the runtime.
// Thread-safety: pure function.
#pragma once

#include "intercept/planner.h"
#include "runtime/names/call_table.h"

namespace fanstore::runtime {

inline intercept::Interest ServedInterest() {
  intercept::Interest interest;
  for (int nr = 0; nr < kCallRowsN; ++nr)
    if (kCallRows[static_cast<size_t>(nr)].flags & kListed)
      interest.nrs.set(static_cast<size_t>(nr));
  return interest;
}

}  // namespace fanstore::runtime
