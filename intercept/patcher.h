// The patcher: decodes the loaded libc (and libpthread.so.0, whose wrappers before glibc
// 2.34 are its own), plans every syscall site, writes stubs within
// +-2 GiB of libc (mapped RW, then RX; never RWX) and replaces the planned ranges with
// jumps to them. Call Install once, from a constructor. Libc's text is writable (not
// executable) only while its bytes are rewritten, nothing in that window calls into libc,
// and any other thread is stopped meanwhile (thread_park.h).
// Thread-safety: Install is not thread-safe; afterwards the patched code is.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "intercept/hook_api.h"
#include "intercept/libc_plan.h"

namespace fanstore::intercept {

struct PatchStats : PlanSummary {   // the plan's counts, after stubs out of reach
  uint64_t unknown_nr_patched = 0;  // stubs with the run-time clone/vfork check
  bool plan_cached = false;         // the plan came from the plan cache (plan_cache.h)
  bool clone_mark = false;          // every clone/vfork path writes the clone mark
  double decode_ms = 0, total_ms = 0;
  uint64_t stub_bytes = 0;
  uint32_t xsave_bytes = 0;
  uint32_t threads_stopped = 0;  // other threads stopped while libc changed
  uint32_t threads_moved = 0;    // of them, resumed in a stub (stopped inside a range)
  uint32_t libraries = 1;        // patched: libc, and libpthread.so.0 where it is loaded
};

// Installs `spec.hook` for every planned site. On failure nothing was patched.
Result<PatchStats> Install(const HookSpec& spec);

}  // namespace fanstore::intercept
