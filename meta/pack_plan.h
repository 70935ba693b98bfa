// The pack-time placement of members into partitions (a pure function).
//  - Files and symlinks not matching a --broadcast glob are cut, in path order, into
//    `partitions` contiguous runs of about equal bytes (a member goes to the partition that
//    holds the midpoint of its byte range), so each partition is a few whole directories.
//  - Members matching a broadcast glob go to one extra partition flagged broadcast.
//  - Every partition carries the root and the ancestors of its members, so each partition
//    is a self-contained tree; directories with nothing below them go to partition 0 (or
//    the broadcast partition if they match a glob).
// Thread-safety: pure function.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "meta/member.h"

namespace fanstore::meta {

// One partition per this many bytes when --partitions is not given (see DefaultPartitions).
inline constexpr uint64_t kDefaultPartitionBytes = 256ull << 20;

struct PartitionPlan {
  uint32_t flags = 0;
  std::vector<size_t> members;  // indices into the sorted member list, in path order
};

// ceil(bytes / 256 MiB), at least 1, at most kMaxShardedPartitions.
uint32_t DefaultPartitions(uint64_t file_bytes);

// `members` sorted by path with the root first. Returns `partitions` plans, plus one
// broadcast plan when any member matches `broadcast`.
std::vector<PartitionPlan> PlanPartitions(const std::vector<Member>& members, uint32_t partitions,
                                          const std::vector<std::string>& broadcast);

// A deterministic 64-bit identity of a pack: FNV-1a over every member's path, kind, mode,
// size and mtime and over `salt` (the options that shape the output).
uint64_t DatasetId(const std::vector<Member>& members, const std::string& salt);

}  // namespace fanstore::meta
