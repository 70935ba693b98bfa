// What fanrun_node.cc and the files split from it share: the start-up's state, handed from
// phase to phase, and the helpers more than one phase uses. Internal to bin/.
//   fanrun_node.cc      the node's life: join, agree, announce, finish, tear down
//   fanrun_namespace.cc the exchange, the namespace image, the mount point and skeleton
//   fanrun_jobdirs.cc   the job's and rank's directories, stale jobs, --local-dir
//   fanrun_stage.cc     whether and how this node's partitions are staged, and the copier
//   fanrun_skeleton.cc  the mount point and the dataset's directories made under it
// Thread-safety: fanrun's main thread (the copier thread uses only what StartCopier hands
// it).
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "bin/fanrun_node.h"
#include "meta/manifest.h"
#include "meta/namespace_image.h"
#include "meta/partition_reader.h"
#include "meta/placement.h"

namespace fanstore::fanrun {

using Clock = std::chrono::steady_clock;
inline double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// What the start-up's phases hand on to each other. A rank whose own part failed keeps
// going through the collective steps with `st` set, so every rank reaches each agreement.
struct Node::StartUp {
  Status st;
  std::string where;        // "rank R (host): " under MPI, "" alone
  meta::Manifest manifest;  // (empty when `st` says why it could not be read)
  std::string abs_data;
  meta::Placement placement;
  bool stage = false;  // copy the partitions to local storage
  // Partitions that had to be read in place from DATA although the node stages: its local
  // directory had no room for them. The node's blobs are then not all its own copies.
  std::vector<uint32_t> in_place;
  std::vector<std::string> local_paths;  // per partition: where this node reads it ("" = remote)
  std::vector<uint8_t> broadcast;
  std::vector<meta::PartitionReader> readers;
  uint64_t staged_bytes = 0, exchanged = 0;
  std::string small_pages_why;  // why a staged tmpfs copy is not in huge pages ("": it is)
  double stage_s = 0, exchange_s = 0, build_s = 0;  // seconds
};

std::string HostName();
// Writes `bytes` to `path` whole, under a temporary name renamed last.
Status WriteFile(const std::string& path, std::string_view bytes);

// fanrun_skeleton.cc
std::vector<std::string> MakeSkeleton(const meta::NamespaceView& ns, const std::string& mount);
void RemoveSkeleton(const std::vector<std::string>& made, const std::string& mount);
Status CheckMountPoint(const std::string& mount);

// fanrun_jobdirs.cc
bool ProcessRuns(int pid);
void RemoveStale(const std::string& base);
Status MakeLocalParent(const std::string& dir);

}  // namespace fanstore::fanrun
