// One fanrun rank's node: stage-in of its partitions, the namespace exchange
// (MPI_Allgatherv), the namespace image in shared memory, and the node agent. Without
// mpiexec it is one node serving every partition in place, with no MPI at all.
// Shared objects live in a private directory (bin/private_dir.h), usually
// /dev/shm/fanstore-<uid>/job-<JOB>/rank-<R>/ (namespace.img,
// agent.sock, mount) and staged blobs plus the node cache in the local directory; all of it
// is removed by Teardown.
// Thread-safety: used by fanrun's main thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/status.h"
#include "bin/private_dir.h"
#include "io/agent.h"
#include "io/landing.h"
#include "meta/manifest.h"

namespace fanstore::fanrun {

// ThreadSanitizer's runtime cannot take a fork while another thread runs: built with it,
// fanrun starts its threads only once CMD is forked.
#if defined(__SANITIZE_THREAD__)
inline constexpr bool kForkWaitsForThreads = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool kForkWaitsForThreads = true;
#else
inline constexpr bool kForkWaitsForThreads = false;
#endif
#else
inline constexpr bool kForkWaitsForThreads = false;
#endif

// fanrun's exit status for its own failure (125, as env(1) and timeout(1) use).
inline constexpr int kExitFanrun = 125;

struct NodeOptions {
  std::string data;
  std::string mount;      // "" = the source path recorded at pack time
  std::string local_dir;  // "" = the job's directory under /dev/shm
  std::string job;        // "" = generated
  bool no_stage = false;
  bool stage = false;  // --stage: copy even from a local file system (bin/stage_decision.h)
  uint32_t replicas = 1;
  uint64_t cache_bytes = 1ull << 30;
  uint64_t fetch_ahead = 1ull << 20;
  double timeout_s = 10;
  bool serve = false;  // attach mode: the job directory is marked for `fanrun attach`
};

class Node {
 public:
  ~Node();
  // Everything up to "ready". In MPI mode every rank calls it; a failure on any rank makes
  // it fail on every rank (the failing rank prints the reason, rank 0 names that rank).
  Status Setup(const NodeOptions& opt, bool mpi);
  // Waits for the agent to finish with every rank (wrap mode, after CMD), or for a stop
  // (serve mode), then removes the job's files and finalizes MPI. `exit_status`: what this
  // process exits with if MPI_Finalize never returns (see FinalizeBounded).
  void Finish(int exit_status);
  void WaitUntilStopped();
  void StopFromSignal();

  int rank() const { return rank_; }
  int nodes() const { return nodes_; }
  // This rank's index among the job's ranks on its host (0 with one rank per node).
  int local_rank() const { return local_rank_; }
  const std::string& job() const { return job_; }
  const std::string& rank_dir() const { return rank_dir_; }
  // The usual private directory of this user's jobs on this host (bin/private_dir.h), where
  // what later jobs may reuse is kept; "" when this job uses a fresh one (removed at its end).
  std::string kept_base() const {
    return fresh_base_.empty() ? job_dir_.substr(0, job_dir_.rfind('/')) : "";
  }
  const std::string& local_dir() const { return local_dir_; }  // the staged copies' directory
  const std::string& image_path() const { return image_path_; }
  const std::string& socket_path() const { return socket_path_; }
  const std::string& mount() const { return mount_; }
  // The node cache's directory: in the local directory, or the rank's own under /dev/shm
  // when the local directory had no room for it (StageIn).
  std::string cache_dir() const { return cache_dir_.empty() ? local_dir_ + "/cache" : cache_dir_; }
  bool staged() const { return staged_; }  // the local blobs are this job's own copies
  // DATA while its copies are still being made (staged while CMD runs), else "".
  const std::string& staging_from() const { return staging_from_; }
  const std::string& data_dir() const { return abs_data_; }  // DATA, absolute
  // One of this node's blobs as CMD will first read it (a copy, or DATA's while the copy is
  // made), for measuring read costs (bin/read_calibration.h); "" when it holds none.
  const std::string& some_blob() const { return some_blob_; }
  // Starts that copy (a thread), if StageIn has not: a process forked while another thread
  // runs is what ThreadSanitizer's runtime cannot take, so under it the copy starts once
  // CMD is forked. Elsewhere StageIn starts it, before the partitions' indexes are read.
  void StartStaging() {
    if (!copier_.joinable()) StartCopier(copies_manifest_);
  }
  io::AgentStats agent_stats() const;

 private:
  struct StartUp;  // (fanrun_node.cc)
  // Setup's phases, in order.
  Status Join(const NodeOptions& opt, bool mpi, StartUp* s);
  void MakeJobDirectories(const NodeOptions& opt, StartUp* s);
  Status UseLocalDir(const std::string& what, const std::string& abs_dir);
  void StageIn(const NodeOptions& opt, StartUp* s);
  Status AwaitShare(StartUp& s);
  Status StartNamespace(const NodeOptions& opt, StartUp* s);
  void Announce(const StartUp& s, double ready_s, double stage_to_ready_s);

  void Teardown();
  void FinalizeBounded();
  Status MakeVerifiedMarks(const std::vector<uint8_t>& checked);
  Result<std::string> HoldBlob(uint32_t partition, const std::string& path);
  Status PublishImage(std::string_view exchanged, const std::vector<std::string>& local_paths,
                      uint64_t dataset_id);

  bool mpi_ = false;
  double finalize_limit_s_ = 30;
  int leave_status_ = kExitFanrun;  // (until Finish or WaitUntilStopped says)
  int rank_ = 0, nodes_ = 1, local_rank_ = 0;
  std::string job_, job_dir_, rank_dir_, local_dir_, image_path_, socket_path_, mount_;
  bool own_local_dir_ = false;
  std::string fresh_base_;  // a base made because the usual one was another user's
  DirId local_id_;          // (proves at clean-up that local_dir_ is still the directory made)
  bool staged_ = false;
  // This node's copies made while CMD runs: partitions (index, source, copy) copied by
  // copier_ (the agent answers other nodes from them as they land).
  struct Copy {
    uint32_t partition;
    std::string src, dst;
  };
  std::vector<Copy> copies_;
  // Under a launcher from a shared file system: the share is read and checked before CMD,
  // its copy made while CMD runs (StageIn, AwaitShare).
  bool fetch_first_ = false;
  meta::Manifest copies_manifest_;
  // Which chunks of those copies have landed, and which ones readers wait for: a file in
  // the rank's directory, mapped by every served process (io/landing.h).
  io::LandingMap landing_;
  std::string staging_from_;
  std::vector<int> held_blobs_;
  std::string abs_data_;  // DATA, absolute  // DATA's blobs, open for the job's life (HoldBlob)
  std::string some_blob_;
  std::string cache_dir_;  // "" = local_dir_/cache
  // Or DATA's blobs read into the page cache in huge folios while CMD runs (io/warm.h), by
  // the same thread.
  std::vector<std::string> warm_;
  std::thread copier_;  // (named "fanrun-copy", as the threads it starts)
  std::atomic<bool> cancel_copy_{false};
  // The copy or the warming takes only the time CMD leaves idle, and readers read DATA in
  // place until a partition is copied (bin/stage_decision.h yield).
  bool yield_ = false;
  double start_after_s_ = 0;  // (and starts once CMD has run this long)
  void StartCopier(const meta::Manifest& manifest);
  void EnterCopierThread();
  uint8_t* image_ = nullptr;  // the shared mapping of the image file (the agent's view)
  uint64_t image_size_ = 0;
  std::vector<std::string> skeleton_;
  std::unique_ptr<io::Agent> agent_;
  bool torn_down_ = false;
};

// "1G", "512M", "64k", "1000" (bytes; K/M/G/T are powers of 1024).
Result<uint64_t> ParseSize(const std::string& s);

}  // namespace fanstore::fanrun
