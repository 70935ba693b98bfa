// The name of every FANSTORE_* environment variable any part of FanStore reads or sets,
// with what it means: fanrun sets most of them for CMD (bin/fanrun_child.cc), the runtime
// reads them once at start (runtime/process/env.h), the interception core reads its own before the
// runtime exists (intercept/entry.cc), and the exec hook carries them across exec
// (intercept/exec_env.h). docs/guide.md lists those a user may set.
// Thread-safety: none needed (constants).
#pragma once

#include <cstddef>

namespace fanstore::env {

// What every name starts with (the exec hook carries each variable so named).
inline constexpr char kPrefix[] = "FANSTORE_";

// Read by the interception core, before the runtime:
// 0: no interception at all (the process runs natively; also stops the exec hook).
inline constexpr char kIntercept[] = "FANSTORE_INTERCEPT";
// 1: save the vector state with XSAVEC/XRSTOR instead of plain moves.
inline constexpr char kXsave[] = "FANSTORE_XSAVE";
// error | warn | info | debug, and a file for the lines (default stderr).
inline constexpr char kLogLevel[] = "FANSTORE_LOG_LEVEL";
inline constexpr char kLogFile[] = "FANSTORE_LOG_FILE";
// Where libc patch plans are cached (default /dev/shm/fanstore-<uid>).
inline constexpr char kCacheDir[] = "FANSTORE_CACHE_DIR";

// Read by the runtime (runtime/process/env.h reads them into Env):
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
// inflate): once per member per node (unset, the default: runtime/data/verified.h), `all` on
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
// A file the runtime creates once it serves a process: fanrun sets it for a container
// runtime's CMD only (bin/container.h), and says so when no process inside made it. Set,
// it also tells the runtime it runs in a container, where DATA's blobs are checked against
// the identities fanrun held (runtime/process/held_blobs.h).
inline constexpr char kServedMark[] = "FANSTORE_SERVED_MARK";
// "HOST\nINSIDE": the job's directory as fanrun made it and where a container sees it (the
// other variables name it there already); the namespace image's blob paths are read through it.
inline constexpr char kPathMap[] = "FANSTORE_PATH_MAP";
// Set by the runtime for a program it execs, read and removed by that program's runtime:
// the open-file slab's fd and the virtual fds it inherits (runtime/calls/inherit.h), and its
// virtual working directory.
inline constexpr char kFds[] = "FANSTORE_FDS";
inline constexpr char kCwd[] = "FANSTORE_CWD";

// For CMD, not the runtime: which node it runs on, of how many, and its place on its host.
inline constexpr char kRank[] = "FANSTORE_RANK";
inline constexpr char kNodes[] = "FANSTORE_NODES";
inline constexpr char kLocalRank[] = "FANSTORE_LOCAL_RANK";

// Read by fanrun and fsbench:
// Set: no start-up or progress lines.
inline constexpr char kQuiet[] = "FANSTORE_QUIET";
// Set (fanrun --verbose): what each node does with DATA and why, as the job starts and as
// its copy ends (bin/cli_util.h TalkLevel).
inline constexpr char kVerbose[] = "FANSTORE_VERBOSE";
// Seconds CMD runs before one node's own copy (or warming) of a local DATA starts
// (bin/stage_decision.h start_after_s; default 10).
inline constexpr char kCopyAfter[] = "FANSTORE_COPY_AFTER";
// The preload library to give CMD (default: the one installed beside fanrun).
inline constexpr char kPreload[] = "FANSTORE_PRELOAD";
// The MPI fanrun and fsbench load under a launcher: mpich, openmpi, or the path of an MPI
// library (default: the launcher's, bin/mpi_load.h).
inline constexpr char kMpi[] = "FANSTORE_MPI";
// For tests only: each serving rank flips a byte in its first N replies; rank R takes
// requests and never answers; each staged copy waits N ms before it starts.
inline constexpr char kTestCorruptReplies[] = "FANSTORE_TEST_CORRUPT_REPLIES";
inline constexpr char kTestSilentRank[] = "FANSTORE_TEST_SILENT_RANK";
inline constexpr char kTestCopyDelayMs[] = "FANSTORE_TEST_COPY_DELAY_MS";
// For tests: each chunk of a copy made while CMD runs waits N ms before it starts; the copy
// fails once N chunks have landed; chunks land in the copy even where DATA keeps pages cached.
inline constexpr char kTestChunkDelayMs[] = "FANSTORE_TEST_CHUNK_DELAY_MS";
inline constexpr char kTestCopyFailAfter[] = "FANSTORE_TEST_COPY_FAIL_AFTER";
inline constexpr char kTestLandInCopy[] = "FANSTORE_TEST_LAND_IN_COPY";

// Whether the environment entry `e` ("NAME=value") assigns the variable `name`.
constexpr bool Assigns(const char* e, const char* name) {
  size_t i = 0;
  for (; name[i]; ++i)
    if (e[i] != name[i]) return false;
  return e[i] == '=';
}

}  // namespace fanstore::env
