#include "bin/fanrun_node.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>

#include "base/env_names.h"
#include "bin/cli_util.h"
#include "bin/fanrun_node_parts.h"
#include "bin/mount_choice.h"
#include "bin/mpi_load.h"
#include "bin/private_dir.h"
#include "bin/stage_decision.h"
#include "io/mpi.h"
#include "io/node_cache.h"
#include "io/pieces.h"
#include "io/stage.h"
#include "io/yield.h"
#include "meta/dataset.h"
#include "meta/exchange.h"
#include "meta/manifest.h"
#include "meta/namespace_image.h"
#include "meta/partition_reader.h"
#include "meta/placement.h"
#include "runtime/paths/skeleton.h"

namespace fanstore::fanrun {
namespace {

namespace fs = std::filesystem;

// Says why this rank failed (st), once for the job when every rank failed with the same
// message (a DATA no node can read). True on every rank when every rank is fine; else
// `failed_rank` is the lowest failing one. One collective: the minimum of each rank's
// message hash (0: fine), of its complement (so the highest hash) and of its failing rank,
// all kept within 0..INT64_MAX.
bool SayAndAgree(bool mpi, const Status& st, int rank, int nodes, const std::string& where,
                 int* failed_rank) {
  constexpr int64_t kFine = INT64_MAX;
  const int64_t h =
      st.ok() ? 0 : static_cast<int64_t>(std::hash<std::string>{}(st.message()) >> 2) | 1;
  const int64_t mine[3] = {h, kFine - h, st.ok() ? kFine : rank};
  int64_t all[3] = {mine[0], mine[1], mine[2]};
  if (mpi) mpi::World().AllreduceMinInt64(mine, all, 3);
  const bool all_same = nodes > 1 && all[0] != 0 && all[0] == kFine - all[1];  // nobody is fine
  if (!st.ok() && (!all_same || rank == 0))
    cli::Error("fanrun", (all_same ? "every rank, as " + where : where) + st.message());
  *failed_rank = all[2] == kFine ? INT_MAX : static_cast<int>(all[2]);
  return all[2] == kFine;
}

// A barrier that does not poll a core away, for the start-up's uneven steps (each rank's
// copies, then its node cache allocated ahead: a rank holding little copies little and may
// cache much, or the reverse). A rank that ends a step first would otherwise spin in the
// next collective (MPICH's shared-memory progress) while the others work, and where ranks
// share a host's cores that core is taken from their copies and from the shared file
// system's client. Two ranks on two cores reading from MooseFS: the waiting rank's 0.6-1.3
// CPU-s made the job's 1.9-2.9 s.
void MeetWithoutSpinning() {
  mpi::Request met;
  mpi::World().Ibarrier(&met);
  for (long ns = 20'000; !mpi::World().Test(&met); ns = std::min(2 * ns, 1'000'000L))
    std::this_thread::sleep_for(std::chrono::nanoseconds(ns));
}

}  // namespace

Result<uint64_t> ParseSize(const std::string& s) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || errno != 0 || v < 0)
    return Status::Error("'" + s + "': not a size (examples: 512M, 4G)");
  std::string unit(end);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
  if (unit.size() == 2 && (unit[1] == 'i' || unit[1] == 'I')) unit.pop_back();
  double mult = 1;
  if (unit.empty()) {
  } else if (unit.size() == 1 && std::strchr("kK", unit[0])) {
    mult = 1024.0;
  } else if (unit.size() == 1 && std::strchr("mM", unit[0])) {
    mult = 1024.0 * 1024;
  } else if (unit.size() == 1 && std::strchr("gG", unit[0])) {
    mult = 1024.0 * 1024 * 1024;
  } else if (unit.size() == 1 && std::strchr("tT", unit[0])) {
    mult = 1024.0 * 1024 * 1024 * 1024;
  } else {
    return Status::Error("'" + s + "': unknown unit (use K, M, G or T)");
  }
  return static_cast<uint64_t>(v * mult);
}

Node::~Node() {
  Teardown();
}

Status Node::Setup(const NodeOptions& opt, bool mpi) {
  const auto t_start = Clock::now();
  StartUp s;
  FANSTORE_RETURN_IF_ERROR(Join(opt, mpi, &s));
  MakeJobDirectories(opt, &s);

  const auto t_stage = Clock::now();
  StageIn(opt, &s);
  if (fetch_first_ && s.st.ok()) s.st = AwaitShare(s);
  if (mpi_) MeetWithoutSpinning();
  int failed = 0;
  if (!SayAndAgree(mpi_, s.st, rank_, nodes_, s.where, &failed)) {
    if (!s.st.ok()) return Status::Error("");  // already said
    return Status::Error(rank_ == 0 ? "stage-in failed on rank " + std::to_string(failed) +
                                          "; the job stops before running the command"
                                    : "");
  }
  // The node cache is allocated ahead only now that every rank has staged: ranks sharing a
  // host (and its local disk) would otherwise see one rank's cache take the room another's
  // copies still needed (a full-disk test failed that way). Then every rank starts the
  // namespace's start-up together. (Ranks reading a shared file system allocated theirs
  // while their shares landed, AwaitShare: their copies are made while CMD runs.)
  if (agent_ && !fetch_first_) agent_->AllocateCacheAhead();
  if (mpi_) MeetWithoutSpinning();
  s.stage_s = Since(t_stage);

  const auto t_exchange = Clock::now();
  FANSTORE_RETURN_IF_ERROR(StartNamespace(opt, &s));
  if (!SayAndAgree(mpi_, s.st, rank_, nodes_, s.where, &failed)) {
    if (!s.st.ok()) return Status::Error("");
    return Status::Error(rank_ == 0 ? "start-up failed on rank " + std::to_string(failed) : "");
  }
  // "Ready" is the end of that agreement, which waits for every rank: from the end of the
  // stage-in (every rank's stage-in agreed) it is the namespace's start-up, everything it
  // takes once the bytes are local.
  Announce(s, Since(t_start), Since(t_exchange));
  if (!copies_.empty()) copies_manifest_ = s.manifest;  // (for StartStaging)
  return Status::Ok();
}

// MPI (rank, size), this rank's log lines, and the job's id: failures here are the same on
// every rank or come before any collective step, so they are returned at once.
Status Node::Join(const NodeOptions& opt, bool mpi, StartUp* s) {
  finalize_limit_s_ = std::max(30.0, 3 * opt.timeout_s);
  if (mpi) {
    // More ranks than cores on this host (a test, or a small machine): MPICH's default ring
    // Allgatherv for large payloads then takes one scheduling round per step for every rank,
    // and spinning ranks starve each other (1.28 M entries, 4 ranks on 2 cores: 30 s).
    // Recursive doubling needs log2(N) steps (0.6 s). A user's own choice is kept.
    const char* local_ranks = std::getenv("MPI_LOCALNRANKS");
    if (local_ranks && std::atol(local_ranks) > ::sysconf(_SC_NPROCESSORS_ONLN))
      ::setenv("MPIR_CVAR_ALLGATHERV_INTRA_ALGORITHM", "recursive_doubling", 0);
    auto loaded = cli::LoadMpi();  // (the launcher's MPI: bin/mpi_load.h)
    if (!loaded.ok()) return loaded.status();
    std::string error;
    const bool init = mpi::World().Init(&error);
    mpi_ = mpi::World().Initialized();
    if (!init) return Status::Error(error);
    rank_ = mpi::World().Rank();
    nodes_ = mpi::World().Size();
    local_rank_ = std::max(0, mpi::World().HostRank());
  }
  s->where = mpi_ ? "rank " + std::to_string(rank_) + " (" + HostName() + "): " : "";
  // The agent's log lines go to stderr, one line each, naming the rank.
  auto logger = spdlog::stderr_logger_mt("fanrun");
  logger->set_pattern("fanrun: " + s->where + "%v");
  spdlog::set_default_logger(logger);
  // (fanrun --log-level; else warnings and errors only, unless --verbose: CMD's stderr is
  // CMD's, cli::TalkLevel)
  if (const char* level = std::getenv(fanstore::env::kLogLevel))
    spdlog::set_level(spdlog::level::from_str(level));
  else
    spdlog::set_level(cli::TalkLevel() == cli::Talk::kVerbose ? spdlog::level::info
                                                              : spdlog::level::warn);

  // The job id: given, or rank 0's host and pid, the same on every rank.
  job_ = opt.job;
  if (job_.empty()) {
    char id[300] = {};
    if (rank_ == 0)
      std::snprintf(id, sizeof id, "%s-%d", HostName().c_str(), static_cast<int>(::getpid()));
    if (mpi_) mpi::World().Bcast(id, sizeof id, 0);
    job_ = id;
  }
  if (job_.find('/') != std::string::npos || job_ == "." || job_ == "..")
    return Status::Error("--job: '" + job_ + "' must not contain '/'");
  return Status::Ok();
}

// One summary line from rank 0: the slowest node's figures. Then the agent starts: from
// here on only it calls MPI.
void Node::Announce(const StartUp& s, double ready_s, double stage_to_ready_s) {
  double local[5] = {s.stage_s, s.exchange_s + s.build_s, ready_s, s.exchange_s, stage_to_ready_s},
         slowest[5];
  double bytes = static_cast<double>(s.staged_bytes), total_bytes = bytes;
  std::copy(local, local + 5, slowest);
  if (mpi_) {
    mpi::World().ReduceMaxDouble(local, slowest, 5, 0);
    mpi::World().ReduceSumDouble(&bytes, &total_bytes, 1, 0);
  }
  if (agent_) agent_->Start();
  // The summary is for jobs of several nodes, whose start-up is worth reporting; one node
  // says it only under --verbose (cli::TalkLevel).
  const cli::Talk talk = cli::TalkLevel();
  if (!mpi_ || rank_ != 0 || talk == cli::Talk::kQuiet ||
      (nodes_ == 1 && talk != cli::Talk::kVerbose))
    return;
  auto view = meta::NamespaceView::AttachLayout({image_, image_size_});  // (checked at start-up)
  if (!view.ok()) return;
  uint64_t path_bytes = 0;  // names (and symlink targets) in the image's string table
  for (uint32_t i = 0; i < view->size(); ++i) {
    const meta::ImageEntry& e = view->entry(i);
    path_bytes += e.path_len + (e.kind == static_cast<uint8_t>(meta::Kind::kSymlink) ? e.size : 0);
  }
  const double entries = static_cast<double>(view->size());
  // (copies made while CMD runs: what was staged before is nothing, or the share read and
  // checked before CMD)
  char staged[128];
  if (fetch_first_)
    std::snprintf(
        staged, sizeof staged,
        "read and checked %s in %.2f s (%.0f MB/s per node), copied while the command runs",
        cli::HumanBytes(total_bytes).c_str(), slowest[0],
        slowest[0] > 0 ? total_bytes / nodes_ / 1e6 / slowest[0] : 0.0);
  else if (copies_.empty())
    std::snprintf(staged, sizeof staged, "staged %s in %.2f s (%.0f MB/s per node)",
                  cli::HumanBytes(total_bytes).c_str(), slowest[0],
                  slowest[0] > 0 ? total_bytes / nodes_ / 1e6 / slowest[0] : 0.0);
  else
    std::snprintf(staged, sizeof staged, "each node copies its share while the command runs");
  char line[512];
  std::snprintf(
      line, sizeof line,
      "fanrun: %d node%s ready in %.2f s: %s; "
      "namespace %llu entries, %s exchanged (%.0f B/entry) in %.3f s, exchange+image %.3f s, "
      "stage-in to ready %.3f s; "
      "image %s (%.0f B/entry + %.0f B of path)\n",
      nodes_, nodes_ == 1 ? "" : "s", slowest[2], staged,
      static_cast<unsigned long long>(view->size()),
      cli::HumanBytes(static_cast<double>(s.exchanged)).c_str(),
      static_cast<double>(s.exchanged) / entries, slowest[3], slowest[1], slowest[4],
      cli::HumanBytes(static_cast<double>(image_size_)).c_str(),
      static_cast<double>(image_size_ - path_bytes) / entries,
      static_cast<double>(path_bytes) / entries);
  std::fputs(line, stderr);
}
io::AgentStats Node::agent_stats() const {
  return agent_ ? agent_->Stats() : io::AgentStats{};
}

void Node::Finish(int exit_status) {
  leave_status_ = exit_status;
  if (agent_) {
    agent_->Finish();
    const io::AgentStats a = agent_->Stats();
    spdlog::debug(
        "agent: {} fetches ({} bytes, {} members fetched ahead, {} of them evicted "
        "unread), served {}, {} node-cache hits, {} deduplicated, {} timeouts, {} CRC "
        "retries, {} failures, {} evictions, {} requests waited for the copy ({} gave up on "
        "it)",
        a.fetched, a.fetched_bytes, a.fetched_ahead, a.ahead_unread, a.served, a.cache_hits,
        a.deduplicated, a.timeouts, a.crc_retries, a.failures, a.evictions, a.waited_for_copy,
        a.gave_up_on_copy);
  }
  Teardown();
}

void Node::WaitUntilStopped() {
  leave_status_ = 0;
  if (agent_) agent_->WaitUntilStopped();
  Teardown();
}

void Node::StopFromSignal() {
  if (agent_) agent_->RequestStopFromSignal();
}

void Node::Teardown() {
  if (torn_down_) return;
  torn_down_ = true;
  cancel_copy_ = true;  // (CMD is done: a copy still running is of no use)
  // (a yielding copier on a node other jobs keep busy could take seconds to see the flag)
  if (yield_ && copier_.joinable()) io::StopYielding();
  // (one node: the skeleton's directories go while the copier stops, an rmdir ~0.1 ms on
  // ext4 mounted `discard`, by a thread per parent (RemoveSkeleton: fanrun ended 15-20 ms
  // after CMD with 203 in two parents); ranks sharing a host remove theirs once they have
  // met, below)
  std::thread skeleton;
  if (!mpi_) skeleton = std::thread([this] { RemoveSkeleton(skeleton_, mount_); });
  if (copier_.joinable()) copier_.join();
  const bool agent_met_the_others = agent_ && agent_->running() && mpi_;
  agent_.reset();
  if (image_) ::munmap(image_, image_size_);
  image_ = nullptr;
  for (const int fd : held_blobs_) ::close(fd);
  held_blobs_.clear();
  if (mpi_ && !agent_met_the_others) {  // start-up failed: meet the other ranks here
    mpi::Request barrier;
    mpi::World().Ibarrier(&barrier);  // (the agents' end-of-job barrier is an Ibarrier)
    mpi::World().Wait(&barrier);
  }
  if (skeleton.joinable())
    skeleton.join();
  else
    RemoveSkeleton(skeleton_, mount_);
  std::error_code ec;
  if (own_local_dir_) RemoveIfSame(local_dir_, local_id_);
  if (!rank_dir_.empty()) fs::remove_all(rank_dir_, ec);
  if (!job_dir_.empty()) {
    ::unlink((job_dir_ + "/serve").c_str());
    ::rmdir(job_dir_.c_str());  // the last rank on this host removes it
  }
  if (!fresh_base_.empty()) ::rmdir(fresh_base_.c_str());
  if (mpi_) {
    if (!mpi::World().Finalized()) FinalizeBounded();
  }
}

// MPI_Finalize, bounded in time. MPICH 4.0.2 with UCX over TCP sometimes never returns from
// it: one rank keeps flushing an endpoint to a peer that already waits in the PMI barrier,
// which makes no UCX progress (seen with gdb here in about 1 of 6 TCP runs; the same shape
// as open-mpi/ompi#11087 and openucx/ucx#2254). Every rank has passed the agents' barrier and
// this one has cleaned up its files by now, so nothing is lost: after the limit the rank
// says so and exits with the status it would have had.
void Node::FinalizeBounded() {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::thread watchdog([&] {
    std::unique_lock<std::mutex> lk(m);
    if (cv.wait_for(lk, std::chrono::duration<double>(finalize_limit_s_), [&] { return done; }))
      return;
    spdlog::warn(
        "MPI_Finalize did not return within {:.0f} s (a known MPICH/UCX hang at the end of "
        "a job over TCP); the job's work is done, leaving without it",
        finalize_limit_s_);
    spdlog::default_logger()->flush();
    std::fflush(nullptr);
    ::_exit(leave_status_);
  });
  mpi::World().Finalize();
  {
    std::lock_guard<std::mutex> lk(m);
    done = true;
  }
  cv.notify_one();
  watchdog.join();
}

}  // namespace fanstore::fanrun
