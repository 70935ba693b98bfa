// Whether a node copies its share of DATA to node-local storage before serving it, and why:
// a pure function of the options, the number of nodes, DATA's file system type and the
// room where the copies would go, so the rule is table-tested apart from any machine.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

namespace fanstore::fanrun {

struct StageInputs {
  int nodes = 1;
  bool launched = false;         // under a launcher (MPI), as one rank or several
  bool stage_flag = false;       // --stage
  bool no_stage_flag = false;    // --no-stage
  bool local_dir_given = false;  // --local-dir
  long data_fs_type = 0;         // statfs(DATA).f_type
  uint64_t share_bytes = 0;      // this node's partitions
  uint64_t local_free = 0;       // free bytes where the copies would go
  bool local_is_memory = false;  // and that place is tmpfs: a copy there takes memory
  // Without --local-dir: a directory on a local disk (FindLocalDisk), "" when none, and its
  // free bytes, for a copy that does not fit where copies go by default.
  std::string disk_where;
  uint64_t disk_free = 0;
  std::string local_where;     // that place, for the reason
  uint64_t mem_available = 0;  // MemAvailable of /proc/meminfo
  bool shmem_huge = false;     // a copy in /dev/shm can be huge pages (io::ShmemCollapseError)
};

struct StageDecision {
  bool stage = false;
  // The copy is made while CMD runs (reads wait for their chunks, io/landing.h; another
  // node's request waits in this node's agent): on one node, or on several with --stage;
  // several nodes otherwise copy before the namespace exchange.
  // One node copies DATA from a local file system too when the copy can be huge pages in
  // /dev/shm and the share fits in half of the available memory: a warm epoch then reads
  // out of 2 MiB pages whatever the page cache held (1.5-1.8x native against 1.3-1.5x from
  // ext4's page cache, docs/performance.md).
  bool overlap = false;
  // Under a launcher without --stage, from a shared file system: the share is read once into
  // the page cache and checked there before CMD (every chunk landed, io/landing.h), and the
  // copy is made from it while CMD runs.
  bool fetch_first = false;
  std::string why;        // "DATA is on NFS", "--no-stage", ...
  std::string local_dir;  // the copies go to this local disk instead (disk_where), or ""
  // Served in place from a local file system, with the node's share fitting in half of the
  // available memory: fanrun reads the blobs into the page cache in huge folios while CMD
  // runs (io/warm.h), so that a warm epoch copies out of 2 MiB folios whatever order the
  // first one read in.
  bool warm = false;
  // One node (no launcher), DATA not on a shared file system: the copy made while CMD runs,
  // or the warming, takes only the CPU and disk time CMD leaves idle (io/yield.h), and
  // readers never wait for it: they read DATA in place, as --no-stage does, until each
  // partition's copy is complete. DATA's page cache serves them as fast as it serves
  // --no-stage, so waiting for a chunk would only put the copier on their path; from a
  // shared file system they wait, so that its server sees each byte once.
  bool yield = false;
  // And a copy or warming fanrun chose itself (not --stage or --local-dir) starts only once
  // CMD has run this long: while it runs, even at SCHED_IDLE, it slowed a warm epoch by new
  // processes 10-40 % on a 2-core VM (memory bandwidth, the kernel's page-cache and
  // huge-page work), and only a job long enough to read DATA many times gains from it (a
  // settled epoch 1.2-1.4x faster than in place). A job shorter than this pays nothing.
  double start_after_s = 0;
};
inline constexpr double kOwnCopyAfterS = 10;

StageDecision DecideStaging(const StageInputs& in);

// The name of a network, cluster or FUSE file system type (statfs f_type), or nullptr for
// one that keeps its data on this machine.
const char* SharedFsName(long fs_type);

// The name of a known local file system type, or nullptr.
const char* LocalFsName(long fs_type);

}  // namespace fanstore::fanrun
