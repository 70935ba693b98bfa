// The memory a node offers fanrun's copies in /dev/shm, which are charged to the job: the
// kernel's estimate of what is available, and what the job's memory cgroups still allow.
// Thread-safety: reentrant (reads /proc and /sys).
#pragma once

#include <cstdint>

namespace fanstore::fanrun {

// MemAvailable of /proc/meminfo in bytes, 0 when unknown.
uint64_t MemAvailable();
// The tightest memory cgroup limit less usage over this process's cgroup and its ancestors
// (v2 or v1), UINT64_MAX where none is set or readable.
uint64_t CgroupRoom();
// The lesser of the two: what staging decisions count (bin/stage_decision.h).
uint64_t MemoryForCopies();

}  // namespace fanstore::fanrun
