// CMD's side of fanrun: the environment it gets (the preload library and the variables the
// runtime reads, base/env_names.h; which node it runs on), and its life (fork, exec, signals
// forwarded, the exit status it ends with).
// Thread-safety: fanrun's main thread only; RunCommand installs signal handlers.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "bin/fanrun_node.h"

namespace fanstore::fanrun {

// Exit statuses of a CMD that could not start, as a shell gives them.
inline constexpr int kExitCannotRun = 126, kExitNotFound = 127;

// Says "fanrun: msg" (if msg is not empty) and returns kExitFanrun.
int Fail(const std::string& msg);

// An error when this process already runs on a dataset, unless `image` (the one CMD would
// get, when known) is that one.
Status CheckNotNested(const std::string& image = "");
// An error when srun started fanrun without a PMI (every task would run alone).
Status CheckLauncher();
// libfanstore.so beside this executable (installed or in the build tree), or
// $FANSTORE_PRELOAD; "" if not found.
std::string FindPreload();

// Sets LD_PRELOAD and the runtime's variables for CMD: the image, the mount point and its
// other spellings (found from the working directory and cmd's arguments), the agent and
// node cache ("" agent: one node), and whether the local blobs are staged copies.
Status SetRuntimeEnv(const std::string& image, const std::string& mount, const std::string& agent,
                     const std::string& node_cache, bool staged,
                     const std::vector<std::string>& cmd);
// Where the runtime reads partitions not copied yet ("" = all are in place).
void SetStagingFrom(const std::string& data);
// FANSTORE_MAPPED_READS for CMD, unless the user set it: measured on `blob`
// (bin/read_calibration.h), or, when `scratch_dir` is given, on a file of its own there
// (a blob still being copied from a shared file system is not read twice for it). That
// choice, the machine's, is kept in the private directory `keep_in` (if given) per file
// system type, and taken from there by later jobs (until /dev/shm is emptied: a reboot).
void ChooseMappedReads(const std::string& blob, const std::string& scratch_dir = "",
                       const std::string& keep_in = "");
// Which node CMD runs on, of how many, and its place on its host (-1: not known, unset).
void SetPlaceEnv(int rank, const std::string& nodes, int local_rank);

// Forks and execs CMD (without the launcher's variables if `scrub`), starts the node's
// staging once it runs, forwards SIGTERM, SIGHUP, SIGQUIT, SIGUSR1/2 to it, and waits.
// Returns its wait status.
Result<int> RunCommand(std::vector<std::string>& cmd, bool scrub, Node* node);
// Replaces this process with CMD (an MPI application keeps its rank); returns the exit
// status to end with when that fails.
int ExecInPlace(std::vector<std::string>& cmd);
// The exit code a shell gives a command that ended with wait status `status`.
int ExitCodeOf(int status);
// Ends like CMD did: killed by the same signal, or with its exit code.
int ExitLike(int status);

}  // namespace fanstore::fanrun
