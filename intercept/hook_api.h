// The interface between the interception layer and whoever handles system calls (the
// FanStore runtime, or a test hook). One function sees every intercepted call.
// Thread-safety: the hook is called concurrently from every thread, from signal handlers
// (possibly nested in a hook already running on the same thread) and from vfork children
// sharing the parent's memory: there it must not allocate, lock or change shared state.
#pragma once

#include "intercept/call_abi.h"
#include "intercept/planner.h"

namespace fanstore::intercept {

struct HookSpec {
  Hook hook = nullptr;
  Prefilter prefilter = nullptr;
  PrefilterAgain prefilter_again = nullptr;  // needed if the prefilter returns kAgain
  Interest interest;                         // sites of other (known) numbers are left unpatched
  bool full_xsave = false;  // save the whole XCR0 state with XSAVEC (cpu_state.h, mode 3)
};

}  // namespace fanstore::intercept
