#include "meta/placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace fanstore::meta {
namespace {

TEST(PlacementTest, PartitionIGoesToNodeIModN) {
  const Placement pl{4, 1};
  for (uint32_t p = 0; p < 20; ++p) {
    EXPECT_EQ(pl.Owners(p, false), std::vector<uint32_t>{p % 4}) << p;
    for (uint32_t n = 0; n < 4; ++n) EXPECT_EQ(pl.Holds(n, p, false), n == p % 4);
  }
}

TEST(PlacementTest, ReplicasAreTheNextNodesAndClampToN) {
  const Placement pl{4, 2};
  EXPECT_EQ(pl.Owners(3, false), (std::vector<uint32_t>{3, 0}));
  EXPECT_EQ(pl.Owners(5, false), (std::vector<uint32_t>{1, 2}));
  const Placement many{3, 7};
  EXPECT_EQ(many.Owners(1, false), (std::vector<uint32_t>{1, 2, 0}));
  const Placement zero{3, 0};
  EXPECT_EQ(zero.Owners(4, false), std::vector<uint32_t>{1});
  // Holds agrees with Owners everywhere, and every node holds about the same share.
  for (uint32_t nodes : {1u, 2u, 3u, 5u, 8u})
    for (uint32_t k : {1u, 2u, 3u}) {
      const Placement p{nodes, k};
      std::vector<uint32_t> load(nodes, 0);
      for (uint32_t part = 0; part < 40; ++part) {
        const auto owners = p.Owners(part, false);
        EXPECT_EQ(owners.size(), std::min(k, nodes));
        for (uint32_t n = 0; n < nodes; ++n) {
          const bool listed = std::find(owners.begin(), owners.end(), n) != owners.end();
          EXPECT_EQ(p.Holds(n, part, false), listed) << nodes << " " << k << " " << part;
          load[n] += listed;
        }
      }
      const auto [lo, hi] = std::minmax_element(load.begin(), load.end());
      EXPECT_LE(*hi - *lo, std::min(k, nodes)) << nodes << " " << k;
    }
}

TEST(PlacementTest, BroadcastPartitionsAreOnEveryNode) {
  const Placement pl{3, 1};
  EXPECT_EQ(pl.Owners(7, true), (std::vector<uint32_t>{0, 1, 2}));
  for (uint32_t n = 0; n < 3; ++n) EXPECT_TRUE(pl.Holds(n, 7, true));
}

}  // namespace
}  // namespace fanstore::meta
