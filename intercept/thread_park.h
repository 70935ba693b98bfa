// Stops the process's other threads while libc's text is rewritten. A preload library's
// constructor usually runs alone, but a library loaded before it may already have started
// threads in its own constructor (UCX's VFS thread, for one, in any program linked with UCX
// 1.12 or later). Such a thread may be executing libc, or be blocked in a system call
// inside a range about to be replaced, while the patcher makes the text writable and not
// executable: it would fault, or resume in the middle of the new jump.
//
// ParkOtherThreads sends each other thread one real-time signal whose handler records the
// thread's resume address and waits on a futex; the patcher moves any resume address that
// lies inside a patched range to the same instruction in the stub (stub.h StubPcFor), and
// UnparkThreads lets them go. A thread blocked in a restartable call (read, accept, futex)
// resumes it; one in poll, epoll_wait or a sleep sees EINTR, as it would for any signal.
// With no other thread (the common case) this costs one read of /proc/self/task.
// Thread-safety: call from one thread (the constructor), in the order Park, pcs, Unpark.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"

namespace fanstore::intercept {

// Stops every other thread, including threads they start meanwhile. On success,
// `resume_pcs` holds a pointer to each stopped thread's saved instruction pointer (in its
// signal frame), which may be changed before UnparkThreads. Fails, with every thread
// released, if a thread did not stop within two seconds (it blocks the signal, or is stuck in
// the kernel): libc must then be left as it is.
Status ParkOtherThreads(std::vector<uint64_t*>* resume_pcs);

// Lets every stopped thread continue (from its possibly changed resume address).
void UnparkThreads();

}  // namespace fanstore::intercept
