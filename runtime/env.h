// Every FANSTORE_* variable the runtime reads, in one place: their names (which fanrun uses
// to set them for CMD, bin/fanrun_child.cc), what each means, and Env, the values read once
// at start. The interception core reads its own few (FANSTORE_INTERCEPT, FANSTORE_XSAVE,
// FANSTORE_LOG_LEVEL, FANSTORE_LOG_FILE, FANSTORE_CACHE_DIR: docs/guide.md) before the
// runtime exists.
// Thread-safety: ReadEnv reads the environment; call it before any thread is started.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace fanstore::runtime::env {

// The namespace image fanrun published; unset or empty: not under fanrun, the runtime
// stays out of the way.
inline constexpr char kImage[] = "FANSTORE_IMAGE";
// The absolute mount point.
inline constexpr char kMount[] = "FANSTORE_MOUNT";
// The mount point with its symlinks resolved, when that differs (getcwd and realpath give
// this spelling).
inline constexpr char kMountReal[] = "FANSTORE_MOUNT_REAL";
// The mount point spelled through symlinks to it or above it, one per line; a link to a
// directory inside the dataset as "LINK<tab>DIR" (fanrun finds them in its working
// directory and CMD's arguments).
inline constexpr char kMountAliases[] = "FANSTORE_MOUNT_ALIASES";
// How raw members are checked against their CRC32C (compressed ones always are, on every
// inflate): once per member per node (unset, the default: runtime/verified.h), `all` on
// every read of a member up to 8 MiB, `none` never (trusting the blobs).
inline constexpr char kVerify[] = "FANSTORE_VERIFY";
// 1 (stderr) or a path: one JSON line of statistics per process at exit.
inline constexpr char kStats[] = "FANSTORE_STATS";
// Bytes read around a member that comes from the device, or auto (1 MiB when the node's
// blobs fit in half of the memory).
inline constexpr char kReadahead[] = "FANSTORE_READAHEAD";
// 0: page-cached members are always read with pread; 1: copied from a mapping of the blob
// when that is known to pay (fanrun measures which at start: bin/read_calibration.h).
inline constexpr char kMappedReads[] = "FANSTORE_MAPPED_READS";
// DATA as fanrun was given it (absolute): what errors name for a blob read in place, which
// the runtime itself opens through fanrun's descriptor (bin/fanrun_stage.cc, HoldBlob).
inline constexpr char kData[] = "FANSTORE_DATA";
// The node agent's socket (several nodes: members other nodes hold come through it).
inline constexpr char kAgent[] = "FANSTORE_AGENT";
// The agent's node cache directory (members fetched before, shared by the node's processes).
inline constexpr char kNodeCache[] = "FANSTORE_NODE_CACHE";
// Seconds to wait for one answer of the agent (default 60).
inline constexpr char kAgentTimeout[] = "FANSTORE_AGENT_TIMEOUT";
// 1: the local blobs are fanrun's own staged copies (read without residency checks on tmpfs).
inline constexpr char kStaged[] = "FANSTORE_STAGED";
// DATA while this node's copies are still being made: where partitions not copied yet are read.
inline constexpr char kStagingFrom[] = "FANSTORE_STAGING_FROM";
// Set by the runtime for a program it execs, read and removed by that program's runtime:
// the open-file slab's fd and the virtual fds it inherits (runtime/inherit.h), and its
// virtual working directory.
inline constexpr char kFds[] = "FANSTORE_FDS";
inline constexpr char kCwd[] = "FANSTORE_CWD";

// For CMD, not the runtime: which node it runs on, of how many, and its place on its host.
inline constexpr char kRank[] = "FANSTORE_RANK";
inline constexpr char kNodes[] = "FANSTORE_NODES";
inline constexpr char kLocalRank[] = "FANSTORE_LOCAL_RANK";

// The values the runtime starts with (the inherited kFds and kCwd are read by inherit.cc).
struct Env {
  std::string image;                 // "" = not under fanrun
  std::string mount;                 // as given (checked by State's Init)
  std::string mount_real;            // "" unless absolute
  std::string mount_aliases;         // the raw list
  std::string data;                  // "" unless absolute
  bool verify_all = false;           // FANSTORE_VERIFY=all
  bool verify_none = false;          // FANSTORE_VERIFY=none
  std::string stats;                 // "" | "1" | path
  std::optional<int64_t> readahead;  // unset: auto
  std::optional<bool> mapped_reads;  // unset: the runtime's default
  std::string agent;                 // "" = none
  std::string node_cache;
  std::optional<int> agent_timeout_ms;  // unset (or not a positive number): the default
  bool staged = false;
  std::string staging_from;  // "" unless absolute
};

Env ReadEnv();

}  // namespace fanstore::runtime::env
