#include "bin/fanrun_node.h"

#include <fcntl.h>
#include <mpi.h>
#include <signal.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <thread>

#include "bin/cli_util.h"
#include "bin/mount_choice.h"
#include "bin/private_dir.h"
#include "bin/stage_decision.h"
#include "io/node_cache.h"
#include "io/pieces.h"
#include "io/stage.h"
#include "meta/dataset.h"
#include "meta/exchange.h"
#include "meta/manifest.h"
#include "meta/namespace_image.h"
#include "meta/partition_reader.h"
#include "meta/placement.h"
#include "runtime/skeleton.h"

namespace fanstore::fanrun {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string HostName() {
  char h[256] = {};
  ::gethostname(h, sizeof h - 1);
  return h;
}

Status WriteFile(const std::string& path, std::string_view bytes) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) return Status::Error(path + ": cannot write (is the file system full?)");
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) return Status::FromErrno(path, errno);
  return Status::Ok();
}

// Creates, below the mount point, the dataset's directories that do not exist natively
// (so a chdir into the dataset leaves a kernel cwd that children inherit). Returns what
// was created, to be removed at exit, deepest first.
std::vector<std::string> MakeSkeleton(const meta::NamespaceView& ns, const std::string& mount) {
  std::vector<std::string> made;
  std::error_code ec;
  std::vector<std::string> parents;
  for (fs::path p = mount; !p.empty() && !fs::exists(p, ec); p = p.parent_path())
    parents.push_back(p.string());
  std::vector<std::pair<std::string, int64_t>> marks;  // made at or below the mount point
  for (auto it = parents.rbegin(); it != parents.rend(); ++it) {
    if (::mkdir(it->c_str(), 0755) == 0) {
      made.push_back(*it);
      if (*it == mount) marks.emplace_back(*it, ns.entry(0).mtime_ns);
    } else if (errno != EEXIST) {
      // The dataset is served all the same, and the runtime passes a working directory
      // inside it across exec (runtime/inherit.h); a program without the runtime finds no
      // such directory as its working directory.
      spdlog::warn(
          "cannot create the mount point's directory {} ({}): served all the same; "
          "a program without the runtime (a static binary) started inside the "
          "dataset will not find its working directory",
          *it, std::strerror(errno));
      return made;
    }
  }
  // Parents before children: a walk down from the root.
  std::vector<uint32_t> todo = {0};
  while (!todo.empty()) {
    const meta::ImageEntry& dir = ns.entry(todo.back());
    todo.pop_back();
    for (uint32_t c = 0; c < dir.child_count; ++c) {
      const uint32_t i = ns.Child(dir, c);
      const meta::ImageEntry& e = ns.entry(i);
      if (e.kind != static_cast<uint8_t>(meta::Kind::kDir)) continue;
      const std::string p = mount + "/" + std::string(ns.path(e));
      if (::mkdir(p.c_str(), 0755) == 0) {
        made.push_back(p);
        marks.emplace_back(p, e.mtime_ns);
      }
      todo.push_back(i);
    }
  }
  // The mark (runtime/skeleton.h), once every directory is made (a mkdir below one changes
  // its mtime): the dataset directory's second, kSkeletonMarkNs nanoseconds.
  for (const auto& [p, mtime_ns] : marks) {
    const timespec times[2] = {
        {0, UTIME_OMIT}, {static_cast<time_t>(mtime_ns / 1'000'000'000), runtime::kSkeletonMarkNs}};
    ::utimensat(AT_FDCWD, p.c_str(), times, 0);
  }
  // Search only (0111): a program that reaches a skeleton directory through a link the
  // runtime was not told of gets the kernel's EACCES, which the runtime answers from the
  // dataset (a listing; EROFS for a file created there), instead of creating files there,
  // invisible through the mount and left behind, or listing directories without their
  // files. So a successful native directory open needs no check (runtime/prefilter.cc).
  // Root is not stopped by mode bits (docs/design.md). (The mount point's missing parents,
  // made too, are not the dataset's: they stay 0755.)
  for (const std::string& p : made)
    if (p.size() >= mount.size() && p.compare(0, mount.size(), mount) == 0)
      ::chmod(p.c_str(), 0111);
  return made;
}

// Removes the skeleton directories this rank made (deepest first). They are read-only
// (0111): each is made writable again first, and so is its parent when that is another
// rank's skeleton directory on this host (ranks share a mount point; the parent still
// carries the skeleton mark, runtime/skeleton.h, and nothing else under the mount point is
// touched).
void RemoveSkeleton(const std::vector<std::string>& made, const std::string& mount) {
  for (const std::string& p : made) ::chmod(p.c_str(), 0700);
  for (auto it = made.rbegin(); it != made.rend(); ++it) {
    const std::string parent = fs::path(*it).parent_path().string();
    struct stat st;
    if (parent.size() >= mount.size() && parent.compare(0, mount.size(), mount) == 0 &&
        ::lstat(parent.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::geteuid() &&
        st.st_mtim.tv_nsec == runtime::kSkeletonMarkNs && !(st.st_mode & S_IWUSR))
      ::chmod(parent.c_str(), 0700);
    ::rmdir(it->c_str());
  }
}

// A mount point can be a directory (shadowed while the job runs) or nothing yet (made, with
// its missing parents), not a file: the dataset's root would be a directory where the
// kernel and every child process see a file.
Status CheckMountPoint(const std::string& mount) {
  struct stat st;
  if (::stat(mount.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return Status::Ok();
    return Status::Error("--mount " + mount + ": exists and is not a directory");
  }
  if (errno == ENOTDIR)
    return Status::Error("--mount " + mount + ": a component of the path is not a directory");
  return Status::Ok();
}

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
  if (mpi) MPI_Allreduce(mine, all, 3, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD);
  const bool all_same = nodes > 1 && all[0] != 0 && all[0] == kFine - all[1];  // nobody is fine
  if (!st.ok() && (!all_same || rank == 0))
    cli::Error("fanrun", (all_same ? "every rank, as " + where : where) + st.message());
  *failed_rank = all[2] == kFine ? INT_MAX : static_cast<int>(all[2]);
  return all[2] == kFine;
}

// True while `pid` runs: a zombie (exited, not yet reaped: its parent, a launcher's
// daemon, may never reap it in a container without an init) is not running.
bool ProcessRuns(int pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(stat, text);
  const size_t paren = text.rfind(')');  // "pid (comm) S ...": comm may hold anything
  if (paren == std::string::npos || paren + 2 >= text.size()) return true;  // (hidden: keep it)
  const char state = text[paren + 2];
  return state != 'Z' && state != 'X';
}

// Removes what fanrun ranks that died without cleaning up (killed, or crashed) left under
// `base` (a private directory: everything in it was written by this user's fanruns): a
// rank directory whose recorded pid is gone, its local directory if it is still the one
// that rank made (its recorded device and inode), and job directories left empty.
void RemoveStale(const std::string& base) {
  std::error_code ec;
  for (const auto& job : fs::directory_iterator(base, ec)) {
    if (job.path().filename().string().rfind("job-", 0) != 0 || job.is_symlink(ec)) continue;
    for (const auto& rank : fs::directory_iterator(job.path(), ec)) {
      int pid = 0;
      std::ifstream(rank.path() / "pid") >> pid;
      if (pid <= 0 || ProcessRuns(pid)) continue;
      std::string local, id_text;
      {
        std::ifstream in(rank.path() / "local");
        std::getline(in, local);
        std::getline(in, id_text);
      }
      DirId id;
      if (!local.empty() && ParseDirId(id_text, &id)) RemoveIfSame(local, id);
      fs::remove_all(rank.path(), ec);
    }
    bool ranks_left = false;
    for (const auto& rank : fs::directory_iterator(job.path(), ec))
      ranks_left |= rank.path().filename().string().rfind("rank-", 0) == 0;
    if (!ranks_left) {
      ::unlink((job.path() / "serve").c_str());
      ::rmdir(job.path().c_str());
    }
  }
}

// The parent given as --local-dir, made (like mkdir -p, new directories 0700) if missing.
// Another user must not be able to rename fanrun's directory inside it and put their own
// in its place: a directory others can write to must be sticky, as /tmp is.
Status MakeLocalParent(const std::string& dir) {
  std::error_code ec;
  const mode_t old = ::umask(077);
  fs::create_directories(dir, ec);
  ::umask(old);
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return Status::FromErrno("--local-dir " + dir, errno);
  if (!S_ISDIR(st.st_mode)) return Status::Error("--local-dir " + dir + ": not a directory");
  if ((st.st_mode & 022) && !(st.st_mode & S_ISVTX))
    return Status::Error("--local-dir " + dir +
                         ": others can write to it and it is not sticky (chmod +t), so another "
                         "user could swap fanrun's files there; use a directory of your own");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return Status::FromErrno("--local-dir " + dir, errno);
  return Status::Ok();
}

// The namespace exchange: each rank encodes the partitions it is primary for (rank 0 the
// broadcast ones); sizes, then the payload, by MPI_Allgatherv. Every rank gets every block.
Result<std::string> ExchangeNamespace(bool mpi, int rank, int nodes,
                                      const meta::Placement& placement,
                                      const std::vector<uint8_t>& broadcast,
                                      const std::vector<meta::PartitionReader>& readers) {
  std::string mine;
  for (uint32_t p = 0; p < readers.size(); ++p) {
    const bool primary =
        broadcast[p] ? rank == 0 : placement.Owners(p, false)[0] == static_cast<uint32_t>(rank);
    if (primary) meta::EncodeMembers(readers[p], p, &mine);
  }
  if (!mpi || nodes == 1) return mine;
  std::vector<long long> sizes(static_cast<size_t>(nodes));
  long long my_size = static_cast<long long>(mine.size());
  MPI_Allgather(&my_size, 1, MPI_LONG_LONG, sizes.data(), 1, MPI_LONG_LONG, MPI_COMM_WORLD);
  std::vector<int> counts(sizes.size()), displs(sizes.size());
  long long total = 0;
  for (size_t r = 0; r < sizes.size(); ++r) {
    counts[r] = static_cast<int>(sizes[r]);
    displs[r] = static_cast<int>(total);
    total += sizes[r];
  }
  if (total > INT_MAX)  // the same answer on every rank: all of them stop here
    return Status::Error("the namespace is " + std::to_string(total) +
                         " bytes, over the 2 GiB an MPI_Allgatherv can carry");
  std::string all(static_cast<size_t>(total), '\0');
  MPI_Allgatherv(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, all.data(), counts.data(),
                 displs.data(), MPI_BYTE, MPI_COMM_WORLD);
  return all;
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

// What the start-up's phases hand on to each other. A rank whose own part failed keeps
// going through the collective steps with `st` set, so every rank reaches each agreement.
struct Node::StartUp {
  Status st;
  std::string where;        // "rank R (host): " under MPI, "" alone
  meta::Manifest manifest;  // (empty when `st` says why it could not be read)
  std::string abs_data;
  meta::Placement placement;
  bool stage = false;                    // copy the partitions to local storage
  std::vector<std::string> local_paths;  // per partition: where this node reads it ("" = remote)
  std::vector<uint8_t> broadcast;
  std::vector<meta::PartitionReader> readers;
  uint64_t staged_bytes = 0, exchanged = 0;
  double stage_s = 0, exchange_s = 0, build_s = 0;  // seconds
};

Status Node::Setup(const NodeOptions& opt, bool mpi) {
  const auto t_start = Clock::now();
  StartUp s;
  FANSTORE_RETURN_IF_ERROR(Join(opt, mpi, &s));
  MakeJobDirectories(opt, &s);

  const auto t_stage = Clock::now();
  StageIn(opt, &s);
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
  // namespace's start-up together.
  if (agent_) agent_->AllocateCacheAhead();
  if (mpi_) MPI_Barrier(MPI_COMM_WORLD);
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
  StartCopier(s.manifest);
  return Status::Ok();
}

// The copies one node makes while CMD runs, one partition after another. Each appears
// under its final name only once complete and checked (io/stage.h), which is what the
// runtime looks for (runtime/state.h staging_from); a failed copy leaves that partition
// read in place, and says so.
void Node::StartCopier(const meta::Manifest& manifest) {
  if (copies_.empty()) return;
  // (tests: hold the copy back, so that reads are seen going to DATA first)
  const char* delay = std::getenv("FANSTORE_TEST_COPY_DELAY_MS");
  const long delay_ms = delay ? std::strtol(delay, nullptr, 10) : 0;
  copier_ = std::thread([this, manifest, delay_ms] {
    for (long waited = 0; waited < delay_ms && !cancel_copy_.load(); waited += 10)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const auto t0 = Clock::now();
    uint64_t bytes = 0;
    for (const Copy& c : copies_) {
      auto r = io::StagePartition(c.src, c.dst, manifest, c.partition, &cancel_copy_);
      if (cancel_copy_.load()) return;
      if (!r.ok()) {
        std::fprintf(stderr, "fanrun: staging stopped, the rest is read in place from DATA: %s\n",
                     r.status().message().c_str());
        return;
      }
      bytes += r->bytes;
    }
    const double secs = Since(t0);
    if (!std::getenv("FANSTORE_QUIET"))
      std::fprintf(stderr, "fanrun: staged %s in %.2f s (%.0f MB/s); reads now go to %s\n",
                   cli::HumanBytes(static_cast<double>(bytes)).c_str(), secs,
                   secs > 0 ? static_cast<double>(bytes) / 1e6 / secs : 0.0, local_dir_.c_str());
  });
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
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
      return Status::Error("MPI_Init_thread failed");
    mpi_ = true;
    if (provided < MPI_THREAD_SERIALIZED)
      return Status::Error("the MPI library does not support MPI_THREAD_SERIALIZED");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &nodes_);
    MPI_Comm host;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host) ==
        MPI_SUCCESS) {
      MPI_Comm_rank(host, &local_rank_);
      MPI_Comm_free(&host);
    }
  }
  s->where = mpi_ ? "rank " + std::to_string(rank_) + " (" + HostName() + "): " : "";
  // The agent's log lines go to stderr, one line each, naming the rank.
  auto logger = spdlog::stderr_logger_mt("fanrun");
  logger->set_pattern("fanrun: " + s->where + "%v");
  spdlog::set_default_logger(logger);
  if (const char* level = std::getenv("FANSTORE_LOG_LEVEL"))  // fanrun --log-level
    spdlog::set_level(spdlog::level::from_str(level));

  // The job id: given, or rank 0's host and pid, the same on every rank.
  job_ = opt.job;
  if (job_.empty()) {
    char id[300] = {};
    if (rank_ == 0)
      std::snprintf(id, sizeof id, "%s-%d", HostName().c_str(), static_cast<int>(::getpid()));
    if (mpi_) MPI_Bcast(id, sizeof id, MPI_CHAR, 0, MPI_COMM_WORLD);
    job_ = id;
  }
  if (job_.find('/') != std::string::npos || job_ == "." || job_ == "..")
    return Status::Error("--job: '" + job_ + "' must not contain '/'");
  return Status::Ok();
}

// The manifest (every rank reads the small file itself from the shared file system), and
// this rank's directories: the job's and its own under /dev/shm, and its local directory.
void Node::MakeJobDirectories(const NodeOptions& opt, StartUp* s) {
  Status& st = s->st;
  struct stat data_st;
  // Every error about DATA names the option, as the user wrote it.
  const std::string data = "--data " + opt.data;
  if (::stat(opt.data.c_str(), &data_st) != 0)
    st = errno == ENOENT ? Status::Error(data + ": no such directory")
                         : Status::FromErrno(data, errno);
  else if (!S_ISDIR(data_st.st_mode))
    st = Status::Error(data + ": not a directory (expected a packed dataset)");
  if (st.ok()) {
    auto manifest = meta::Manifest::Load(opt.data);
    if (manifest.ok())
      s->manifest = std::move(manifest).value();
    else
      st = Status::Error("--data " + manifest.status().message());
  }
  if (auto abs = cli::AbsolutePath(data, opt.data); abs.ok())
    s->abs_data = *abs;
  else if (st.ok())
    st = abs.status();
  std::error_code ec;
  // Every rank needs its own base (ranks on other hosts have their own /dev/shm).
  auto base = JobsBaseForNewJob();
  if (!base.ok()) {
    if (st.ok()) st = base.status();
    if (mpi_) MPI_Barrier(MPI_COMM_WORLD);
    return;
  }
  if (*base != JobsBaseName()) fresh_base_ = *base;  // (removed at the end, when empty)
  if (rank_ == 0) RemoveStale(*base);
  if (mpi_) MPI_Barrier(MPI_COMM_WORLD);  // before any rank of this job creates its directory
  job_dir_ = *base + "/job-" + job_;
  rank_dir_ = job_dir_ + "/rank-" + std::to_string(rank_);
  if (st.ok()) {
    if (::mkdir(job_dir_.c_str(), 0700) != 0 && errno != EEXIST)
      st = Status::FromErrno(job_dir_, errno);
  }
  if (st.ok()) st = CheckPrivateDir(job_dir_).status();
  if (st.ok()) {
    fs::remove_all(rank_dir_, ec);
    if (::mkdir(rank_dir_.c_str(), 0700) != 0) st = Status::FromErrno(rank_dir_, errno);
  }
  if (st.ok()) st = WriteFile(rank_dir_ + "/pid", std::to_string(::getpid()) + "\n");
  if (st.ok() && opt.serve) WriteFile(job_dir_ + "/serve", "serve\n");
  if (opt.local_dir.empty()) {
    local_dir_ = rank_dir_;
  } else if (st.ok()) {
    auto abs_local = cli::AbsolutePath("--local-dir " + opt.local_dir, opt.local_dir);
    if (!abs_local.ok()) {
      st = abs_local.status();
      return;
    }
    st = MakeLocalParent(*abs_local);
    if (!st.ok()) return;
    // A fresh name (mkdtemp): a name known in advance could be made first by another user.
    auto made = MakeFreshPrivateDir(*abs_local + "/fanstore-" + std::to_string(::getuid()) + "-" +
                                    job_ + "-rank" + std::to_string(rank_) + "-");
    if (!made.ok()) {
      st = Status::Error("--local-dir " + opt.local_dir + ": " + made.status().message());
      return;
    }
    local_dir_ = *made;
    auto id = CheckPrivateDir(local_dir_);
    if (!id.ok()) {
      st = id.status();
      return;
    }
    local_id_ = *id;
    own_local_dir_ = true;
    st = WriteFile(rank_dir_ + "/local", local_dir_ + "\n" + FormatDirId(local_id_) + "\n");
  }
}

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
  const StageDecision decision = DecideStaging(in);
  s->stage = decision.stage;
  const bool overlap = decision.stage && decision.overlap;
  s->local_paths.assign(parts, "");
  s->broadcast.assign(parts, 0);
  s->readers = std::vector<meta::PartitionReader>(parts);
  for (uint32_t p = 0; p < parts && st.ok(); ++p) {
    s->broadcast[p] = (manifest.partitions[p].flags & meta::kFlagBroadcast) != 0;
    if (!s->placement.Holds(static_cast<uint32_t>(rank_), p, s->broadcast[p])) continue;
    const std::string src = s->abs_data + "/" + meta::PartitionFileName(p);
    std::string path = src;
    if (overlap) {  // read in place now, copied while CMD runs (StartCopier)
      copies_.push_back({p, src, local_dir_ + "/" + meta::PartitionFileName(p)});
    } else if (s->stage) {
      path = local_dir_ + "/" + meta::PartitionFileName(p);
      auto r = io::StagePartition(src, path, manifest, p);
      if (!r.ok()) {
        st = r.status();
        break;
      }
      s->staged_bytes += r->bytes;
    }
    if (Status opened = s->readers[p].Open(path); !opened.ok()) {
      st = opened;
    } else if (Status same = meta::CheckAgainstManifest(s->readers[p], manifest, p); !same.ok()) {
      st = same;
    }
    s->local_paths[p] = overlap ? copies_.back().dst : path;
  }
  if (overlap && st.ok()) staging_from_ = s->abs_data;
  // Said once per node, as the job starts: what happens to DATA's bytes, and why.
  if (st.ok() && !std::getenv("FANSTORE_QUIET") && (in.nodes == 1 || rank_ == 0) &&
      (decision.stage || SharedFsName(in.data_fs_type)))
    std::fprintf(stderr, "fanrun: %s (%s)\n",
                 overlap ? ("copying " + cli::HumanBytes(static_cast<double>(in.share_bytes)) +
                            " of DATA to " + local_dir_ +
                            " while the command runs; reads go to DATA until then")
                               .c_str()
                 : s->stage ? "staging each node's share of DATA before the command starts"
                            : "serving DATA in place",
                 decision.why.c_str());
  socket_path_ = rank_dir_ + "/agent.sock";
  if (!st.ok() || !(mpi_ || opt.serve)) return;
  io::AgentConfig cfg;
  cfg.mpi = mpi_;
  cfg.rank = rank_;
  cfg.placement = s->placement;
  cfg.blob_paths = s->local_paths;
  for (const Copy& c : copies_) cfg.blob_paths[c.partition] = c.src;  // (in place until copied)
  cfg.staged = s->stage;
  cfg.broadcast = s->broadcast;
  cfg.socket_path = socket_path_;
  cfg.cache_dir = cache_dir();
  cfg.cache_bytes = opt.cache_bytes;
  cfg.fetch_ahead = opt.fetch_ahead;
  cfg.timeout_s = opt.timeout_s;
  if (const char* c = std::getenv("FANSTORE_TEST_CORRUPT_REPLIES"))
    cfg.corrupt_replies = std::strtoull(c, nullptr, 10);
  // (a rank whose replies never come, though it is alive and passes the job's barriers)
  if (const char* r = std::getenv("FANSTORE_TEST_SILENT_RANK"))
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
  agent_ = std::make_unique<io::Agent>(std::move(cfg));
  st = agent_->OpenStorage(static_cast<uint32_t>(std::min<uint64_t>(keys, UINT32_MAX - 1)),
                           fetchable);
}

// The namespace: the exchange (whose failure is the same on every rank), the image, the
// files `fanrun attach` and the runtime read, the agent's socket and the mount point's
// directories.
Status Node::StartNamespace(const NodeOptions& opt, StartUp* s) {
  Status& st = s->st;
  const auto t_exchange = Clock::now();
  auto all = ExchangeNamespace(mpi_, rank_, nodes_, s->placement, s->broadcast, s->readers);
  if (!all.ok()) return Status::Error(s->where + all.status().message());
  s->exchanged = all->size();
  s->exchange_s = Since(t_exchange);
  const auto t_build = Clock::now();
  image_path_ = rank_dir_ + "/namespace.img";
  if (st.ok()) st = PublishImage(*all, s->local_paths, s->manifest.dataset_id);
  std::string().swap(*all);
  std::string mount = opt.mount.empty() ? s->manifest.source : opt.mount;
  while (mount.size() > 1 && mount.back() == '/') mount.pop_back();
  if (st.ok() && opt.mount.empty())  // a dataset made by someone else does not choose it
    if (std::string why = DefaultMountRefusal(mount); !why.empty()) st = Status::Error(why);
  if (st.ok() && (mount.empty() || mount[0] != '/'))
    st = Status::Error("--mount: must be an absolute path, got '" + mount + "'");
  if (st.ok()) st = CheckMountPoint(mount);
  mount_ = mount;
  if (st.ok()) st = WriteFile(rank_dir_ + "/mount", mount_);
  if (st.ok()) st = WriteFile(rank_dir_ + "/cache-dir", cache_dir());
  staged_ = s->stage;
  if (st.ok()) st = WriteFile(rank_dir_ + "/staged", staged_ ? "1" : "0");  // (for fanrun attach)
  if (st.ok() && !staging_from_.empty()) st = WriteFile(rank_dir_ + "/staging-from", staging_from_);
  if (st.ok()) st = WriteFile(rank_dir_ + "/nodes", std::to_string(nodes_));
  s->build_s = Since(t_build);
  if (!st.ok()) return Status::Ok();  // (said at the agreement)
  auto view = meta::NamespaceView::Attach({image_, image_size_});
  if (!view.ok()) {
    st = view.status();
    return Status::Ok();
  }
  if (agent_) st = agent_->Open(*view);
  if (st.ok()) skeleton_ = MakeSkeleton(*view, mount_);
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
    MPI_Reduce(local, slowest, 5, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&bytes, &total_bytes, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  }
  if (agent_) agent_->Start();
  // Alone, fanrun stays silent: the summary is for jobs with a start-up worth reporting.
  if (!mpi_ || rank_ != 0 || std::getenv("FANSTORE_QUIET")) return;
  auto view = meta::NamespaceView::AttachLayout({image_, image_size_});  // (checked at start-up)
  if (!view.ok()) return;
  uint64_t path_bytes = 0;  // names (and symlink targets) in the image's string table
  for (uint32_t i = 0; i < view->size(); ++i) {
    const meta::ImageEntry& e = view->entry(i);
    path_bytes += e.path_len + (e.kind == static_cast<uint8_t>(meta::Kind::kSymlink) ? e.size : 0);
  }
  const double entries = static_cast<double>(view->size());
  char line[512];
  std::snprintf(
      line, sizeof line,
      "fanrun: %d node%s ready in %.2f s: staged %s in %.2f s (%.0f MB/s per node); "
      "namespace %llu entries, %s exchanged (%.0f B/entry) in %.3f s, exchange+image %.3f s, "
      "stage-in to ready %.3f s; "
      "image %s (%.0f B/entry + %.0f B of path)\n",
      nodes_, nodes_ == 1 ? "" : "s", slowest[2], cli::HumanBytes(total_bytes).c_str(), slowest[0],
      slowest[0] > 0 ? total_bytes / nodes_ / 1e6 / slowest[0] : 0.0,
      static_cast<unsigned long long>(view->size()),
      cli::HumanBytes(static_cast<double>(s.exchanged)).c_str(),
      static_cast<double>(s.exchanged) / entries, slowest[3], slowest[1], slowest[4],
      cli::HumanBytes(static_cast<double>(image_size_)).c_str(),
      static_cast<double>(image_size_ - path_bytes) / entries,
      static_cast<double>(path_bytes) / entries);
  std::fputs(line, stderr);
}

// Decodes the exchanged members and builds the image straight into a shared mapping of
// the image file (no copy, no write), published under its final name when complete.
Status Node::PublishImage(std::string_view exchanged, const std::vector<std::string>& local_paths,
                          uint64_t dataset_id) {
  const std::string tmp = image_path_ + ".tmp";
  const int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno(tmp, errno);
  auto size = meta::BuildNamespaceImageInto(
      exchanged, local_paths, dataset_id, [&](uint64_t n) -> uint8_t* {
        if (::ftruncate(fd, static_cast<off_t>(n)) != 0) return nullptr;
        void* m = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) return nullptr;
        image_ = static_cast<uint8_t*>(m);
        image_size_ = n;
        return image_;
      });
  ::close(fd);
  if (!size.ok()) {
    ::unlink(tmp.c_str());
    return Status::Error(image_path_ + ": " + size.status().message());
  }
  if (::rename(tmp.c_str(), image_path_.c_str()) != 0) return Status::FromErrno(image_path_, errno);
  return Status::Ok();
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
        "retries, {} failures, {} evictions",
        a.fetched, a.fetched_bytes, a.fetched_ahead, a.ahead_unread, a.served, a.cache_hits,
        a.deduplicated, a.timeouts, a.crc_retries, a.failures, a.evictions);
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
  if (copier_.joinable()) copier_.join();
  const bool agent_met_the_others = agent_ && agent_->running() && mpi_;
  agent_.reset();
  if (image_) ::munmap(image_, image_size_);
  image_ = nullptr;
  if (mpi_ && !agent_met_the_others) {  // start-up failed: meet the other ranks here
    MPI_Request barrier;
    MPI_Ibarrier(MPI_COMM_WORLD, &barrier);  // (the agents' end-of-job barrier is an Ibarrier)
    MPI_Wait(&barrier, MPI_STATUS_IGNORE);
  }
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
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) FinalizeBounded();
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
  MPI_Finalize();
  {
    std::lock_guard<std::mutex> lk(m);
    done = true;
  }
  cv.notify_one();
  watchdog.join();
}

}  // namespace fanstore::fanrun
