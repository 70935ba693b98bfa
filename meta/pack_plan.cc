#include "meta/pack_plan.h"

#include <tsl/robin_map.h>

#include <algorithm>

#include "meta/glob.h"

namespace fanstore::meta {
namespace {

bool IsBroadcast(const std::vector<std::string>& globs, std::string_view path) {
  for (const std::string& g : globs)
    if (GlobMatch(g, path)) return true;
  return false;
}

}  // namespace

uint32_t DefaultPartitions(uint64_t file_bytes) {
  const uint64_t n = (file_bytes + kDefaultPartitionBytes - 1) / kDefaultPartitionBytes;
  return static_cast<uint32_t>(std::clamp<uint64_t>(n, 1, kMaxShardedPartitions));
}

std::vector<PartitionPlan> PlanPartitions(const std::vector<Member>& members, uint32_t partitions,
                                          const std::vector<std::string>& broadcast) {
  const size_t n = members.size();
  std::vector<int64_t> part_of(n, -1);
  std::vector<bool> bcast(n, false);
  uint64_t total = 0, data_members = 0;
  bool any_bcast = false;
  for (size_t i = 1; i < n; ++i) {
    bcast[i] = IsBroadcast(broadcast, members[i].path);
    any_bcast = any_bcast || bcast[i];
    if (!bcast[i] && members[i].kind != Kind::kDir) {
      total += members[i].size;
      ++data_members;
    }
  }
  const uint32_t bpart = partitions;  // id of the broadcast partition, if any
  std::vector<PartitionPlan> plans(partitions + (any_bcast ? 1 : 0));
  if (any_bcast) plans[bpart].flags = kFlagBroadcast;

  // Contiguous cuts by bytes (by count when all members are empty).
  uint64_t cum = 0, seen = 0;
  for (size_t i = 1; i < n; ++i) {
    if (members[i].kind == Kind::kDir) continue;
    if (bcast[i]) {
      part_of[i] = bpart;
      continue;
    }
    uint64_t p;
    if (total > 0) {
      const long double mid = static_cast<long double>(cum) + members[i].size / 2.0L;
      p = static_cast<uint64_t>(mid * partitions / total);
    } else {
      p = seen * partitions / data_members;
    }
    part_of[i] = static_cast<int64_t>(std::min<uint64_t>(p, partitions - 1));
    cum += members[i].size;
    ++seen;
  }

  // Directories: the ancestors of every placed member, plus unplaced (empty) subtrees.
  tsl::robin_map<std::string_view, size_t> dir_index;
  for (size_t i = 0; i < n; ++i)
    if (members[i].kind == Kind::kDir) dir_index.emplace(members[i].path, i);
  std::vector<std::vector<bool>> has_dir(plans.size());
  std::vector<bool> dir_used(n, false);
  auto add_ancestors = [&](size_t p, std::string_view path) {
    auto& marks = has_dir[p];
    if (marks.empty()) marks.assign(n, false);
    for (;;) {
      path = ParentPath(path);
      const size_t d = dir_index.at(path);
      dir_used[d] = true;
      if (marks[d]) return;
      marks[d] = true;
      plans[p].members.push_back(d);
      if (path.empty()) return;
    }
  };
  for (size_t i = 1; i < n; ++i) {
    if (part_of[i] < 0) continue;
    plans[part_of[i]].members.push_back(i);
    add_ancestors(static_cast<size_t>(part_of[i]), members[i].path);
  }
  for (size_t i = 1; i < n; ++i) {
    if (members[i].kind != Kind::kDir || dir_used[i]) continue;
    const size_t p = bcast[i] ? bpart : 0;
    auto& marks = has_dir[p];
    if (marks.empty()) marks.assign(n, false);
    if (!marks[i]) {
      marks[i] = true;
      plans[p].members.push_back(i);
    }
    add_ancestors(p, members[i].path);
  }
  for (size_t p = 0; p < plans.size(); ++p) {
    if (has_dir[p].empty() || !has_dir[p][0]) plans[p].members.push_back(0);  // the root
    std::sort(plans[p].members.begin(), plans[p].members.end());
  }
  return plans;
}

uint64_t DatasetId(const std::vector<Member>& members, const std::string& salt) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const void* p, size_t len) {
    const auto* b = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < len; ++i) h = (h ^ b[i]) * 1099511628211ull;
  };
  mix(salt.data(), salt.size());
  for (const Member& m : members) {
    mix(m.path.data(), m.path.size() + 0);
    const uint64_t fields[] = {static_cast<uint64_t>(m.kind), m.mode, m.size,
                               static_cast<uint64_t>(m.mtime_ns), m.path.size()};
    mix(fields, sizeof fields);
  }
  return h;
}

}  // namespace fanstore::meta
