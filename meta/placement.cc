#include "meta/placement.h"

namespace fanstore::meta {

std::vector<uint32_t> Placement::Owners(uint32_t partition, bool broadcast) const {
  std::vector<uint32_t> out;
  if (broadcast) {
    for (uint32_t n = 0; n < nodes; ++n) out.push_back(n);
    return out;
  }
  const uint32_t k = EffectiveReplicas();
  for (uint32_t r = 0; r < k; ++r)
    out.push_back(static_cast<uint32_t>((uint64_t{partition} + r) % nodes));
  return out;
}

bool Placement::Holds(uint32_t node, uint32_t partition, bool broadcast) const {
  if (broadcast) return true;
  // node is among partition, partition+1, ..., partition+K-1 (mod N).
  const uint32_t distance =
      static_cast<uint32_t>((uint64_t{node} + nodes - partition % nodes) % nodes);
  return distance < EffectiveReplicas();
}

}  // namespace fanstore::meta
