// Placement: which nodes hold which partitions. A pure function of the partition id, the
// number of nodes N and the replica count K (clamped to [1, N]):
//   sharded partition i  ->  nodes i mod N, (i+1) mod N, ..., (i+K-1) mod N   (primary first)
//   broadcast partition  ->  every node
// Every node computes the same answer with no communication, so a reader knows whom to ask
// for a member from its partition id alone.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

namespace fanstore::meta {

struct Placement {
  uint32_t nodes = 1;
  uint32_t replicas = 1;

  uint32_t EffectiveReplicas() const {
    return replicas == 0 ? 1 : (replicas > nodes ? nodes : replicas);
  }
  // The holders of a partition, primary first.
  std::vector<uint32_t> Owners(uint32_t partition, bool broadcast) const;
  // Whether `node` holds the partition.
  bool Holds(uint32_t node, uint32_t partition, bool broadcast) const;
};

}  // namespace fanstore::meta
