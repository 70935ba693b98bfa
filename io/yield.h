// A thread's place behind every other on its node: the copy one node makes of a local DATA
// while CMD runs (bin/stage_decision.h `yield`) takes only the CPU and disk time that CMD
// leaves idle, so that CMD never runs slower than it would with DATA served in place.
// Thread-safety: YieldToOthers acts on the calling thread; StopYielding on every thread of
// the process, from any thread.
#pragma once

namespace fanstore::io {

// Moves the calling thread to SCHED_IDLE (it runs only when no other thread of the node
// wants the CPU; threads it starts inherit the policy) and to the idle I/O class (honoured
// by the BFQ I/O scheduler; others ignore it). Returns 0, or the negative errno of the
// scheduler's refusal (a sandbox may refuse: the thread then keeps its place).
int YieldToOthers();

// Moves every thread of this process that is in SCHED_IDLE back to SCHED_OTHER and the
// default I/O class: a copy cancelled at CMD's end must see its cancel flag at once, even
// on a node that other jobs keep busy. Returns how many threads it moved.
int StopYielding();

}  // namespace fanstore::io
