// Whether this node's partitions are staged (bin/stage_decision.h), the copies made before
// the namespace exchange (several nodes), and the copier that makes them while CMD runs
// (one node, or several with --stage).
#include <fcntl.h>
#include <linux/magic.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "base/env_names.h"
#include "base/page_size.h"
#include "bin/cli_util.h"
#include "bin/fanrun_node_parts.h"
#include "bin/node_memory.h"
#include "bin/stage_decision.h"
#include "io/agent.h"
#include "io/node_cache.h"
#include "io/pieces.h"
#include "io/stage.h"
#include "io/warm.h"
#include "io/yield.h"
#include "meta/dataset.h"
#include "runtime/process/held_blobs.h"

namespace fanstore::fanrun {

namespace {

// A directory on a local disk for a copy that does not fit where copies go by default: the
// first of $TMPDIR, /tmp and /var/tmp on a known local file system that is not memory and
// that this user may write; false when none is.
bool FindLocalDisk(std::string* dir, uint64_t* free_bytes) {
  const char* tmpdir = std::getenv("TMPDIR");
  for (const char* c : {tmpdir ? tmpdir : "", "/tmp", "/var/tmp"}) {
    char real[PATH_MAX];
    struct statfs fs;
    if (!*c || !::realpath(c, real) || ::statfs(real, &fs) != 0 || ::access(real, W_OK | X_OK) != 0)
      continue;
    const long t = static_cast<long>(fs.f_type);
    if (!LocalFsName(t) || t == TMPFS_MAGIC || t == RAMFS_MAGIC) continue;
    *dir = real;
    *free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_bsize;
    return true;
  }
  return false;
}

// Once per rank: a staged copy on tmpfs that the kernel did not make huge pages, and why
// (reads from base pages are slower: docs/performance.md).
void SaySmallPages(const std::string& where, const std::string& dir, const std::string& why) {
  cli::Say(
      "fanrun: %sthe staged copy in %s is in %llu KiB pages, not huge pages (%s): reads from "
      "it are slower\n",
      where.c_str(), dir.c_str(), static_cast<unsigned long long>(base::PageSize() / 1024),
      why.c_str());
}

}  // namespace

// This rank's partitions (placement), copied to its local directory and checked, or checked
// in place; then the rest of the node's local storage: the agent maps the blobs and makes
// the node cache (allocated ahead once every rank has staged, up to what this node may
// fetch: the manifest's members of partitions it does not hold).
void Node::StageIn(const NodeOptions& opt, StartUp* s) {
  Status& st = s->st;
  const meta::Manifest& manifest = s->manifest;
  const uint32_t parts = st.ok() ? static_cast<uint32_t>(manifest.partitions.size()) : 0;
  s->placement = meta::Placement{static_cast<uint32_t>(nodes_), opt.replicas};
  if (rank_ == 0 && opt.replicas > static_cast<uint32_t>(nodes_))  // said once, not per rank
    spdlog::warn("--replicas {} with {} node{}: every node holds every partition", opt.replicas,
                 nodes_, nodes_ == 1 ? "" : "s");
  // Whether to copy, and how (bin/stage_decision.h): from DATA's file system and the room
  // where the copies would go.
  StageInputs in;
  in.nodes = nodes_;
  in.stage_flag = opt.stage;
  in.no_stage_flag = opt.no_stage;
  in.local_dir_given = !opt.local_dir.empty();
  struct statfs data_fs;
  if (st.ok() && ::statfs(s->abs_data.c_str(), &data_fs) == 0)
    in.data_fs_type = static_cast<long>(data_fs.f_type);
  for (uint32_t p = 0; p < parts; ++p)
    if (s->placement.Holds(static_cast<uint32_t>(rank_), p,
                           (manifest.partitions[p].flags & meta::kFlagBroadcast) != 0))
      in.share_bytes += manifest.partitions[p].file_size;
  struct statvfs local_fs;
  if (::statvfs(local_dir_.c_str(), &local_fs) == 0)
    in.local_free = static_cast<uint64_t>(local_fs.f_bavail) * local_fs.f_frsize;
  in.local_where = opt.local_dir.empty() ? "/dev/shm" : opt.local_dir;
  struct statfs local_type;
  in.local_is_memory =
      ::statfs(local_dir_.c_str(), &local_type) == 0 && local_type.f_type == TMPFS_MAGIC;
  in.mem_available = MemoryForCopies();
  if (opt.local_dir.empty() && nodes_ == 1) FindLocalDisk(&in.disk_where, &in.disk_free);
  // (one node, no launcher, DATA local: whether a copy in huge pages is possible decides)
  if (nodes_ == 1 && !mpi_ && !opt.no_stage && st.ok() && !SharedFsName(in.data_fs_type) &&
      in.data_fs_type != TMPFS_MAGIC)
    in.shmem_huge = io::ShmemCollapseError().empty();
  // (under a launcher the share is local before the exchange, unless --stage: a member found
  // damaged then stops every rank before CMD runs; a copy made while CMD runs leaves that to
  // the readers, which check every member they read from it)
  in.launched = mpi_;
  StageDecision decision = DecideStaging(in);
  // (a share read first, its copy made while CMD runs, has the copier under way as CMD is
  // forked, which a fork waiting for threads, under ThreadSanitizer, cannot have: the copy
  // is made first there)
  yield_ = decision.yield;
  start_after_s_ = decision.start_after_s;
  if (const char* after = std::getenv(fanstore::env::kCopyAfter); after && st.ok()) {
    char* end = nullptr;
    const double v = std::strtod(after, &end);
    if (end == after || *end != '\0' || !(v >= 0) || v > 1e9)
      st = Status::Error(std::string(fanstore::env::kCopyAfter) + ": '" + after +
                         "' is not a number of seconds (0 or more)");
    else if (decision.start_after_s > 0)
      start_after_s_ = v;
  }
  fetch_first_ = decision.fetch_first && !kForkWaitsForThreads;
  if (fetch_first_) decision.overlap = true;
  if (st.ok() && decision.stage && !decision.local_dir.empty()) {
    if (Status made = UseLocalDir(decision.local_dir, decision.local_dir); !made.ok()) {
      decision.stage = false;  // (a copy that cannot be made costs speed, not the job)
      decision.why += " (but " + made.message() + ": served in place)";
    }
  }
  s->stage = decision.stage;
  const bool overlap = decision.stage && decision.overlap;
  abs_data_ = s->abs_data;
  s->local_paths.assign(parts, "");
  s->broadcast.assign(parts, 0);
  s->readers = std::vector<meta::PartitionReader>(parts);
  std::string room_error;
  uint64_t in_place_bytes = 0;
  std::vector<std::pair<uint32_t, std::string>> held;  // (partition, the blob it reads first)
  for (uint32_t p = 0; p < parts && st.ok(); ++p) {
    s->broadcast[p] = (manifest.partitions[p].flags & meta::kFlagBroadcast) != 0;
    if (!s->placement.Holds(static_cast<uint32_t>(rank_), p, s->broadcast[p])) continue;
    // DATA's blob through fanrun's own descriptor: the job reads the dataset it started
    // with even if DATA is repacked, moved or deleted while it runs (HoldBlob).
    auto blob = HoldBlob(p, s->abs_data + "/" + meta::PartitionFileName(p));
    if (!blob.ok()) {
      st = blob.status();
      break;
    }
    const std::string src = *blob;
    std::string path = src;
    if (overlap) {  // read in place now, copied while CMD runs (StartCopier)
      copies_.push_back({p, src, local_dir_ + "/" + meta::PartitionFileName(p)});
    } else if (s->stage) {
      // A copy that finds no room leaves the partition read in place from DATA (held open
      // above): too little local storage slows a job, it never stops one whose DATA reads.
      const std::string dst = local_dir_ + "/" + meta::PartitionFileName(p);
      bool no_room = false;
      if (const char* delay = std::getenv(fanstore::env::kTestCopyDelayMs))  // (tests: a slow copy)
        std::this_thread::sleep_for(std::chrono::milliseconds(std::atol(delay)));
      auto r = io::StagePartition(src, dst, manifest, p, nullptr, &no_room);
      if (r.ok()) {
        path = dst;
        s->staged_bytes += r->bytes;
        if (s->small_pages_why.empty()) s->small_pages_why = r->small_pages_why;
      } else if (no_room) {
        if (s->in_place.empty()) room_error = r.status().message();
        s->in_place.push_back(p);
        in_place_bytes += manifest.partitions[p].file_size;
      } else {
        st = r.status();
        break;
      }
    }
    s->local_paths[p] = overlap ? copies_.back().dst : path;
    if (some_blob_.empty()) some_blob_ = path;
    if (decision.warm) warm_.push_back(src);
    held.emplace_back(p, path);
  }
  if (overlap && st.ok()) {
    staging_from_ = rank_dir_ + "/data";
    std::vector<uint64_t> sizes(parts, 0);
    for (const Copy& c : copies_) sizes[c.partition] = manifest.partitions[c.partition].file_size;
    auto map = io::LandingMap::Create(io::LandingPathBeside(rank_dir_ + "/namespace.img"), sizes);
    if (map.ok())
      landing_ = *map;
    else
      st = map.status();
    // (for fanrun attach, and anyone watching: the copy removes it when done)
    if (st.ok()) st = WriteFile(rank_dir_ + "/staging-from", staging_from_);
  }
  // The copy starts now, before the checks below (their round trips would delay the first
  // chunk, which every read of the first epoch waits for), while the namespace is built and
  // CMD starts, unless a fork must wait for it (StartStaging). A check that fails stops the
  // job, and the copy with it (Teardown).
  if (overlap && st.ok() && !kForkWaitsForThreads) StartCopier(manifest);
  // Each partition's header, footer and index, checked against the manifest: read at once
  // (each is a few round trips on a shared file system).
  std::vector<Status> checked(held.size());
  std::atomic<size_t> next{0};
  auto check = [&] {
    for (size_t i; (i = next.fetch_add(1)) < held.size();) {
      const auto& [p, path] = held[i];
      checked[i] = s->readers[p].Open(path);
      if (checked[i].ok()) checked[i] = meta::CheckAgainstManifest(s->readers[p], manifest, p);
    }
  };
  if (st.ok()) {
    std::vector<std::thread> readers;
    for (size_t i = 1; i < std::min<size_t>(held.size(), 8); ++i) readers.emplace_back(check);
    check();
    for (std::thread& t : readers) t.join();
  }
  for (const Status& c : checked)
    if (st.ok() && !c.ok()) st = c;
  // (its absence tells a test or a benchmark that the blobs are warm)
  if (st.ok() && !warm_.empty()) st = WriteFile(rank_dir_ + "/warming", "1");
  // (DATA served in place from a local disk stays silent, as it was: --log-level debug)
  if (st.ok() && !warm_.empty())
    spdlog::debug("reading {} of DATA into the page cache in huge folios while the command runs",
                  cli::HumanBytes(static_cast<double>(in.share_bytes)));
  if (st.ok() && !s->small_pages_why.empty())
    SaySmallPages(s->where, in.local_where, s->small_pages_why);
  if (st.ok() && !s->in_place.empty())
    cli::Say(
        "fanrun: %sno room in %s for %zu of this node's partitions (%s): read in "
        "place from DATA instead (%s)\n",
        s->where.c_str(), in.local_where.c_str(), s->in_place.size(),
        cli::HumanBytes(static_cast<double>(in_place_bytes)).c_str(), room_error.c_str());
  // Said once per node under --verbose, as the job starts: what happens to DATA's bytes,
  // and why.
  if (st.ok() && cli::TalkLevel() == cli::Talk::kVerbose && (in.nodes == 1 || rank_ == 0) &&
      (decision.stage || SharedFsName(in.data_fs_type))) {
    std::string what;
    if (fetch_first_)
      what = (nodes_ > 1 ? "each node reads its share of DATA once and checks it before the "
                           "command starts; its copy in "
                         : "reading DATA once and checking it before the command starts; the "
                           "copy in ") +
             local_dir_ + " is made while the command runs";
    else if (overlap && nodes_ > 1)
      what = "each node copies its share of DATA to " + local_dir_ +
             " while the command runs; reads, and other nodes' requests, take their 2 MiB "
             "chunks as they land, asking for the ones they wait for";
    else if (overlap && yield_)
      what = "copying " + cli::HumanBytes(static_cast<double>(in.share_bytes)) + " of DATA to " +
             local_dir_ + " while the command runs" +
             (start_after_s_ > 0 ? fmt::format(", once it has run {:g} s", start_after_s_) : "") +
             ", on the CPU and disk time it leaves idle; reads go to DATA until each partition "
             "is copied";
    else if (overlap)
      what = "copying " + cli::HumanBytes(static_cast<double>(in.share_bytes)) + " of DATA to " +
             local_dir_ +
             " while the command runs; reads take their 2 MiB chunks as they land, asking for "
             "the ones they wait for";
    else if (s->stage)
      what = nodes_ == 1 ? "staging DATA before the command starts"
                         : "staging each node's share of DATA before the command starts";
    else
      what = "serving DATA in place";
    cli::Say("fanrun: %s (%s)\n", what.c_str(), decision.why.c_str());
  }
  socket_path_ = rank_dir_ + "/agent.sock";
  if (!st.ok() || !(mpi_ || opt.serve)) return;
  io::AgentConfig cfg;
  cfg.mpi = mpi_;
  cfg.rank = rank_;
  cfg.placement = s->placement;
  cfg.blob_paths = s->local_paths;
  if (!copies_.empty()) {  // (read in place until copied)
    cfg.landing_path = io::LandingPathBeside(rank_dir_ + "/namespace.img");
    cfg.copy_paths.assign(parts, "");
  }
  for (const Copy& c : copies_) {
    cfg.blob_paths[c.partition] = c.src;
    cfg.copy_paths[c.partition] = c.dst;
  }
  // (staged: every local blob is fanrun's own copy, which no one else can cut)
  cfg.staged = s->stage && s->in_place.empty() && copies_.empty();
  cfg.broadcast = s->broadcast;
  cfg.socket_path = socket_path_;
  cfg.cache_dir = cache_dir();
  cfg.cache_bytes = opt.cache_bytes;
  cfg.fetch_ahead = opt.fetch_ahead;
  cfg.timeout_s = opt.timeout_s;
  if (const char* c = std::getenv(fanstore::env::kTestCorruptReplies))
    cfg.corrupt_replies = std::strtoull(c, nullptr, 10);
  // (a rank whose replies never come, though it is alive and passes the job's barriers)
  if (const char* r = std::getenv(fanstore::env::kTestSilentRank))
    cfg.silent = std::strtol(r, nullptr, 10) == rank_;
  uint64_t fetchable = 0;
  for (uint32_t p = 0; p < parts; ++p)
    if (s->local_paths[p].empty())
      fetchable +=
          io::ArenaBytesAtMost(manifest.partitions[p].members, manifest.partitions[p].stored);
  // The node cache's keys: the entries, then the pieces of large members (io/pieces.h),
  // bounded here from the stored bytes (the namespace, which numbers them, comes later).
  uint64_t stored = 0;
  for (const auto& part : manifest.partitions) stored += part.stored;
  const uint64_t keys = io::KeysAtMost(manifest.files + manifest.dirs + manifest.symlinks, stored);
  const uint32_t key_count = static_cast<uint32_t>(std::min<uint64_t>(keys, UINT32_MAX - 1));
  const io::AgentConfig again = cfg;
  agent_ = std::make_unique<io::Agent>(std::move(cfg));
  st = agent_->OpenStorage(key_count, fetchable);
  // A local directory without room for the node cache's table: the cache is kept in this
  // rank's directory under /dev/shm instead (bounded by --cache-size), and said.
  if ((st.IsErrno(ENOSPC) || st.IsErrno(EDQUOT)) && local_dir_ != rank_dir_) {
    const std::string first = st.message();
    io::AgentConfig moved = again;
    moved.cache_dir = rank_dir_ + "/cache";
    agent_ = std::make_unique<io::Agent>(std::move(moved));
    st = agent_->OpenStorage(key_count, fetchable);
    if (st.ok()) {
      cache_dir_ = rank_dir_ + "/cache";
      cli::Say("fanrun: %snode cache: %s; it is kept under /dev/shm instead\n", s->where.c_str(),
               first.c_str());
    }
  }
}

// The start-up under a launcher from a shared file system (fetch_first_): waits until every
// chunk of this node's share has landed (the copier, StartCopier, is under way), meanwhile
// allocating the node cache ahead at the lowest CPU priority (zeroing 237 MB of /dev/shm
// took 0.17-0.25 s after the share, on the start-up's path); then checks every raw member
// where it landed, DATA's page cache or the copy, so that a damaged member stops the job
// before CMD as a copy made first does. A copy given up (no room, a failed read) leaves its
// partition read in place, checked by its readers.
Status Node::AwaitShare(StartUp& s) {
  std::thread ahead;
  if (agent_)
    ahead = std::thread([this] {
      ::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), 19);
      agent_->AllocateCacheAhead();
    });
  struct Joined {
    std::thread& t;
    ~Joined() {
      if (t.joinable()) t.join();
    }
  } joined{ahead};
  const auto landed = [this](uint32_t p, uint64_t size) {
    return landing_.State(p) != io::LandingState::kCopying || landing_.RangeLanded(p, 0, size);
  };
  for (const Copy& c : copies_) {
    const uint64_t size = s.manifest.partitions[c.partition].file_size;
    for (;;) {
      const uint32_t seen = landing_.Count(c.partition);
      if (landed(c.partition, size)) break;
      landing_.Wait(c.partition, seen, 100'000'000);
    }
  }
  const auto t_landed = Clock::now();
  const int threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
  for (const Copy& c : copies_) {
    const io::LandingState state = landing_.State(c.partition);
    if (state == io::LandingState::kFailed) continue;
    FANSTORE_RETURN_IF_ERROR(io::CheckMembersRead(s.readers[c.partition],
                                                  state == io::LandingState::kDone ? c.dst : c.src,
                                                  threads, &cancel_copy_));
    s.staged_bytes += s.manifest.partitions[c.partition].file_size;
  }
  spdlog::debug("share landed; checked in {:.3f} s", Since(t_landed));
  return Status::Ok();
}

// Opens DATA's blob `path` and keeps it open for the job's life; returns a name that
// reaches that descriptor for every process of the job (this rank's `data/` directory holds
// a symlink to /proc/<fanrun>/fd/<fd>), which everything reads the blob through from here
// on: the checks against the manifest, the copies, the agent and the served processes.
// `fanstore pack --force` swaps a new dataset in with renames, so the old files live on
// while a job holds them; a path opened later would be the new dataset's. The blob's
// identity goes to the rank's `held-ids` file: where the link cannot be followed (a
// container), DATA itself is read, and only while it is still this file
// (runtime/process/held_blobs.h).
Result<std::string> Node::HoldBlob(uint32_t partition, const std::string& path) {
  const std::string dir = rank_dir_ + "/data";
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return Status::FromErrno(dir, errno);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(path, errno);
  held_blobs_.push_back(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0) return Status::FromErrno(path, errno);
  const std::string ids = runtime::HeldIdsPathBeside(rank_dir_ + "/namespace.img");
  const int out = ::open(ids.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (out < 0) return Status::FromErrno(ids, errno);
  const std::string line = runtime::HeldIdLine(partition, st);
  const bool wrote = ::write(out, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(out);
  if (!wrote) return Status::FromErrno(ids, errno);
  const std::string link = dir + path.substr(path.rfind('/'));
  const std::string target = "/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(fd);
  ::unlink(link.c_str());
  if (::symlink(target.c_str(), link.c_str()) != 0) return Status::FromErrno(link, errno);
  return link;
}

// The copier's first step, in its own thread: a name that `top -H` (and a test) can find,
// a wait until CMD has run start_after_s_ (or has ended), and, where the decision says so,
// its place behind CMD (io/yield.h), which the threads it starts inherit.
void Node::EnterCopierThread() {
  ::pthread_setname_np(::pthread_self(), "fanrun-copy");
  const auto start = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(start_after_s_));
  while (!cancel_copy_.load() && Clock::now() < start)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (!yield_) return;
  if (const int r = io::YieldToOthers(); r < 0)
    spdlog::debug("the copy keeps its CPU priority: sched_setscheduler: {}", std::strerror(-r));
}

// The copies this node makes while CMD runs (io/stage.h StageLanding). Each appears under
// its final name only once complete and checked, which is what the runtime looks for
// (runtime/process/state.h staging_from) and what the agent moves to; a failed copy leaves
// the partitions not finished read in place, and says so.
void Node::StartCopier(const meta::Manifest& manifest) {
  if (copies_.empty() && !warm_.empty()) {
    copier_ = std::thread([this] {
      EnterCopierThread();
      for (const std::string& blob : warm_) {
        if (cancel_copy_.load()) break;
        auto r = io::WarmHuge(blob, &cancel_copy_);
        if (cancel_copy_.load() || !r.ok() || !r->supported) break;
      }
      ::unlink((rank_dir_ + "/warming").c_str());
    });
    return;
  }
  if (copies_.empty()) return;
  // (read here, not in the thread: the main thread may still be setting CMD's environment)
  // (tests: hold the copy back, so that reads are seen going to DATA first; a slow copy, a
  // copy that fails midway, one that lands chunks in the copy)
  const char* delay = std::getenv(fanstore::env::kTestCopyDelayMs);
  const long delay_ms = delay ? std::strtol(delay, nullptr, 10) : 0;
  io::LandingOptions opt;
  if (const char* d = std::getenv(fanstore::env::kTestChunkDelayMs))
    opt.chunk_delay_ms = std::atoi(d);
  if (const char* f = std::getenv(fanstore::env::kTestCopyFailAfter))
    opt.fail_after = std::atoll(f);
  opt.copy_first = std::getenv(fanstore::env::kTestLandInCopy) != nullptr;
  opt.readers_read_in_place = yield_;
  const bool quiet = cli::TalkLevel() != cli::Talk::kVerbose;
  copier_ = std::thread([this, manifest, delay_ms, opt, quiet] {
    EnterCopierThread();
    if (cancel_copy_.load()) return;
    for (long waited = 0; waited < delay_ms && !cancel_copy_.load(); waited += 10)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const auto t0 = Clock::now();
    uint64_t bytes = 0;
    std::string small_pages_why;
    bool huge = false;
    std::vector<io::LandingCopy> copies;
    for (const Copy& c : copies_) copies.push_back({c.partition, c.src, c.dst});
    const Status st =
        io::StageLanding(copies, manifest, &landing_, opt, &cancel_copy_,
                         [&](const io::LandingCopy&, const io::StageResult& r) {
                           bytes += r.bytes;
                           huge = huge || r.huge_pages;
                           if (small_pages_why.empty() && !r.small_pages_why.empty()) {
                             small_pages_why = r.small_pages_why;
                             SaySmallPages("", local_dir_, small_pages_why);
                           }
                         });
    if (cancel_copy_.load()) return;
    if (!st.ok()) {
      if (mpi_)  // (the logger names the rank)
        spdlog::warn("staging stopped, the rest is read in place from DATA: {}", st.message());
      else
        cli::Say("fanrun: staging stopped, the rest is read in place from DATA: %s\n",
                 st.message().c_str());
      return;
    }
    // (its absence tells `fanrun attach` and anyone watching the job that the copy is done)
    ::unlink((rank_dir_ + "/staging-from").c_str());
    const double secs = Since(t0);
    if (mpi_)
      spdlog::debug("staged {} in {:.2f} s while the command runs",
                    cli::HumanBytes(static_cast<double>(bytes)), secs);
    else if (!quiet)
      cli::Say("fanrun: staged %s in %.2f s (%.0f MB/s)%s; reads now go to %s\n",
               cli::HumanBytes(static_cast<double>(bytes)).c_str(), secs,
               secs > 0 ? static_cast<double>(bytes) / 1e6 / secs : 0.0,
               !small_pages_why.empty() ? " in 4 KiB pages"
               : huge                   ? " in huge pages"
                                        : "",
               local_dir_.c_str());
  });
}

}  // namespace fanstore::fanrun
