// fanrun: runs a command with a packed dataset visible at a mount point, served by the
// preload runtime.
//   fanrun --data DATA [node options] -- CMD [ARGS...]          wrap mode (alone, or one
//                                                               rank per node under mpiexec)
//   fanrun serve --data DATA [node options] [--job ID]         attach mode: serve until stopped
//   fanrun attach [--job ID] -- CMD [ARGS...]                  run CMD attached to a served job
//   fanrun stop [--job ID]                                     end a served job (every node)
//   fanrun doctor [--data DATA] [--local-dir D] [--libc F] [--json]   check this machine
// Exit status: CMD's own (a CMD killed by a signal kills fanrun with the same signal);
// 125 when fanrun itself fails before CMD starts, 126 if CMD cannot run, 127 if not found.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "bin/cli_util.h"
#include "bin/fanrun_doctor.h"
#include "bin/fanrun_node.h"
#include "bin/launcher.h"
#include "bin/read_calibration.h"
#include "io/protocol.h"
#include "runtime/mount_ways.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using namespace fanstore;

using fanrun::kExitFanrun;
constexpr int kExitCannotRun = 126, kExitNotFound = 127;
volatile sig_atomic_t g_child = 0;
fanrun::Node* g_serving = nullptr;

void Forward(int sig) {
  if (g_child > 0) ::kill(g_child, sig);
}

void StopServing(int) {
  if (g_serving) g_serving->StopFromSignal();
}

int Fail(const std::string& msg) {
  if (!msg.empty()) cli::Error("fanrun", msg);
  return kExitFanrun;
}

// A fanrun started by a program that already runs on a dataset would hand its CMD a second
// one in place of the first: the first's files would vanish from under the mount point
// (only fanrun's empty directories stay visible there). One dataset per job, said before
// anything starts. `image`: the namespace image CMD would get, when it is known (attach:
// the same job again is fine).
Status CheckNotNested(const std::string& image = "") {
  const char* outer = std::getenv("FANSTORE_IMAGE");
  if (!outer || !*outer || (!image.empty() && image == outer)) return Status::Ok();
  const char* mount = std::getenv("FANSTORE_MOUNT");
  return Status::Error(std::string("already running on a dataset (at ") +
                       (mount && *mount ? mount : "?") +
                       "): one dataset per job; pack the trees together (fanstore pack their "
                       "common parent) or run fanrun outside the first one");
}

// libfanstore.so next to this executable: installed (../lib) or in the build tree.
std::string FindPreload() {
  if (const char* p = std::getenv("FANSTORE_PRELOAD"); p && *p) return p;
  return cli::FindBesideExecutable({"../lib/libfanstore.so",
                                    "../lib/x86_64-linux-gnu/libfanstore.so",
                                    "../runtime/libfanstore.so"});
}

// srun's tasks without a PMI would each run alone, staging and sharing nothing: said once,
// before anything starts, with the fix.
Status CheckLauncher() {
  const std::string why = cli::SrunWithoutPmi();
  return why.empty() ? Status::Ok() : Status::Error(why + "; fanrun doctor shows what srun gives");
}

// The launcher's variables, which must not reach CMD: an MPI program run by CMD would
// otherwise try to join fanrun's own MPI job.
bool IsLauncherVariable(std::string_view name) {
  for (std::string_view prefix :
       {"PMI_", "PMIX_", "HYDRA_", "HYDI_", "MPIR_", "OMPI_", "MPI_LOCAL"})
    if (name.substr(0, prefix.size()) == prefix) return true;
  return false;
}

void ScrubLauncherEnvironment() {
  if (const char* fd = std::getenv("PMI_FD")) ::close(std::atoi(fd));  // the PMI connection
  std::vector<std::string> names;
  for (char** e = environ; *e; ++e) {
    const std::string_view kv(*e);
    const std::string_view name = kv.substr(0, kv.find('='));
    if (IsLauncherVariable(name)) names.emplace_back(name);
  }
  for (const std::string& n : names) ::unsetenv(n.c_str());
}

// Spellings of the mount point through symlinks, which the kernel would follow to its
// empty skeleton (directories, no files), one per line: the mount point spelled through
// the link, or, for a link to a directory inside the dataset, the link and that
// directory's path in the dataset after a tab. Found (at most four, cwd links first) among
//  - the symlinks in the working directory that lead to the mount point, above it or into
//    it (a project's `data -> /datasets/imagenet`, `train -> /datasets/imagenet/train`);
//  - the command's arguments that are paths (also after `=`): the shortest prefix of each
//    whose realpath is the mount point or above it while it is spelled otherwise
//    (`--data /home/u/ds/imagenet` for /home/u/ds -> /scratch/ds).
// `physical`: the mount point with its symlinks resolved.
std::string MountAliases(const std::string& physical, const std::vector<std::string>& cmd) {
  char cwd[PATH_MAX];
  if (!::getcwd(cwd, sizeof cwd)) return {};
  const std::string base = std::strcmp(cwd, "/") == 0 ? "" : cwd;
  // Where `t` (a realpath) stands to the mount point: above it or at it (the rest of the
  // mount point below it), inside it (its path in the dataset), or neither.
  enum class Place { kNone, kLeads, kInside };
  auto place = [&](const std::string& t, std::string* rest) {
    if (t == physical || (t != "/" && physical.compare(0, t.size(), t) == 0 &&
                          physical.size() > t.size() && physical[t.size()] == '/')) {
      *rest = physical.substr(t == "/" ? 0 : t.size());
      return Place::kLeads;
    }
    if (physical != "/" && t.size() > physical.size() + 1 &&
        t.compare(0, physical.size(), physical) == 0 && t[physical.size()] == '/') {
      *rest = t.substr(physical.size() + 1);
      return Place::kInside;
    }
    return Place::kNone;
  };
  std::vector<std::string> found;
  auto add = [&](const std::string& line) {
    if (found.size() < 4 && line.find('\n') == std::string::npos &&
        std::find(found.begin(), found.end(), line) == found.end())
      found.push_back(line);
  };
  std::vector<std::string> names;
  if (DIR* d = ::opendir(".")) {
    while (const dirent* e = ::readdir(d)) {
      struct stat st;
      if (e->d_type == DT_LNK ||
          (e->d_type == DT_UNKNOWN && ::lstat(e->d_name, &st) == 0 && S_ISLNK(st.st_mode)))
        names.emplace_back(e->d_name);
    }
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  char target[PATH_MAX];
  for (const std::string& name : names) {
    std::string rest;
    if (name.find('\t') != std::string::npos || !::realpath(name.c_str(), target)) continue;
    const Place p = place(target, &rest);
    if (p == Place::kLeads) add(base + "/" + name + rest);
    if (p == Place::kInside) add(base + "/" + name + "\t" + rest);
  }
  for (size_t i = 1; i < cmd.size(); ++i) {  // (cmd[0] is the program)
    std::string arg =
        cmd[i].substr(cmd[i].find('=') == std::string::npos ? 0 : cmd[i].find('=') + 1);
    if (arg.find('/') == std::string::npos || arg.find('\t') != std::string::npos) continue;
    if (arg[0] != '/') arg = base + "/" + arg;
    // ("." and ".." would make a spelling no path takes: the ways from a cwd cover "../")
    bool dots = false;
    for (std::string_view rest(arg); !rest.empty() && !dots;) {
      const std::string_view c = fanstore::runtime::NextComponent(&rest);
      dots = c == "." || c == "..";
    }
    if (dots) continue;
    for (size_t end = arg.find('/', 1);; end = arg.find('/', end + 1)) {
      const std::string prefix = arg.substr(0, end);
      std::string rest;
      if (::realpath(prefix.c_str(), target) && prefix != target &&
          place(target, &rest) == Place::kLeads) {
        add(prefix + rest);
        break;
      }
      if (end == std::string::npos) break;
    }
  }
  std::string aliases;
  for (const std::string& line : found) aliases += line + "\n";
  return aliases;
}

// Sets the variables the preload runtime reads.
Status Preload(const std::string& image, const std::string& mount, const std::string& agent,
               const std::string& node_cache, bool staged, const std::vector<std::string>& cmd) {
  const std::string preload = FindPreload();
  if (preload.empty())
    return Status::Error("libfanstore.so not found next to fanrun (set FANSTORE_PRELOAD)");
  std::string ld = preload;
  if (const char* old = std::getenv("LD_PRELOAD"); old && *old) ld += std::string(":") + old;
  ::setenv("LD_PRELOAD", ld.c_str(), 1);
  ::setenv("FANSTORE_IMAGE", image.c_str(), 1);
  ::setenv("FANSTORE_MOUNT", mount.c_str(), 1);
  // A mount point below a symlink (/scratch -> /lustre/scratch) has a second spelling, the
  // one getcwd and realpath give: the runtime serves both. (The mount point exists by now:
  // fanrun made it if it had to.)
  char real[PATH_MAX];
  const bool resolved = ::realpath(mount.c_str(), real) != nullptr;
  if (resolved && mount != real)
    ::setenv("FANSTORE_MOUNT_REAL", real, 1);
  else
    ::unsetenv("FANSTORE_MOUNT_REAL");
  if (const std::string aliases = resolved ? MountAliases(real, cmd) : ""; !aliases.empty())
    ::setenv("FANSTORE_MOUNT_ALIASES", aliases.c_str(), 1);
  else
    ::unsetenv("FANSTORE_MOUNT_ALIASES");
  ::setenv("FANSTORE_STAGED", staged ? "1" : "0", 1);
  if (!agent.empty()) {
    ::setenv("FANSTORE_AGENT", agent.c_str(), 1);
    ::setenv("FANSTORE_NODE_CACHE", node_cache.c_str(), 1);
  } else {
    ::unsetenv("FANSTORE_AGENT");
    ::unsetenv("FANSTORE_NODE_CACHE");
  }
  return Status::Ok();
}

// While one node copies DATA as CMD runs: where the runtime reads partitions not copied yet.
void SetStagingFrom(const std::string& data) {
  if (data.empty())
    ::unsetenv("FANSTORE_STAGING_FROM");
  else
    ::setenv("FANSTORE_STAGING_FROM", data.c_str(), 1);
}

// FANSTORE_MAPPED_READS for CMD, unless set: measured on one of the node's blobs
// (bin/read_calibration.h).
void ChooseMappedReads(const std::string& blob) {
  if (std::getenv("FANSTORE_MAPPED_READS") || blob.empty()) return;
  const auto cost = fanrun::MeasureReadCost(blob);
  if (!cost) return;
  const bool mapped = fanrun::MappedReadsPay(*cost);
  ::setenv("FANSTORE_MAPPED_READS", mapped ? "1" : "0", 1);
  spdlog::debug(
      "reads of page-cached members: {} (per 64 KiB: pread {:.0f} ns, from a new mapping {:.0f} "
      "ns, again {:.0f} ns)",
      mapped ? "copied from the blob's mapping" : "pread", cost->pread, cost->map_first,
      cost->map_again);
}

// Runs CMD and waits for it. Returns its wait status.
Result<int> RunCommand(std::vector<std::string>& cmd, bool scrub, fanrun::Node* node) {
  const pid_t pid = ::fork();
  if (pid < 0) return Status::FromErrno("fork", errno);
  if (pid == 0) {
    if (scrub) ScrubLauncherEnvironment();
    std::vector<char*> args;
    for (auto& c : cmd) args.push_back(c.data());
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    const int e = errno;
    cli::Error("fanrun", cmd[0] + ": " + std::strerror(e));
    _exit(e == ENOENT ? kExitNotFound : kExitCannotRun);
  }
  g_child = pid;
  node->StartStaging();
  struct sigaction sa {};
  sa.sa_handler = Forward;
  for (int sig : {SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) ::sigaction(sig, &sa, nullptr);
  signal(SIGINT, SIG_IGN);  // the terminal delivers it to CMD directly
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  g_child = 0;
  // CMD is gone: from here on a signal from the launcher ends fanrun itself (mpiexec sends
  // SIGTERM to abort a job; nothing is left to forward it to).
  for (int sig : {SIGTERM, SIGHUP, SIGQUIT, SIGINT}) ::signal(sig, SIG_DFL);
  return status;
}

// The exit code a shell gives a command that ended with wait status `status`.
int ExitCodeOf(int status) {
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : kExitFanrun;
}

// Ends like CMD did: killed by the same signal, or with its exit code.
int ExitLike(int status) {
  if (WIFSIGNALED(status)) {
    ::signal(WTERMSIG(status), SIG_DFL);
    ::raise(WTERMSIG(status));
  }
  return ExitCodeOf(status);
}

// Options given as sizes ("1G"), parsed after CLI11 by FinishOptions.
struct SizeOptions {
  std::string cache_size, fetch_ahead;
};

void AddNodeOptions(CLI::App* app, fanrun::NodeOptions* o, SizeOptions* sizes, bool require) {
  app->add_option("--data,-d", o->data, "Packed dataset directory (manifest + part-*.fsb)")
      ->required(require);
  app->add_option("--mount,-m", o->mount,
                  "Where the dataset appears (absolute; default: the source path recorded at pack "
                  "time; shadows a real directory there)");
  app->add_option("--local-dir", o->local_dir,
                  "Node-local directory for staged partitions and the node cache (default: a "
                  "per-job, per-rank directory under /dev/shm)");
  auto* no_stage =
      app->add_flag("--no-stage", o->no_stage,
                    "Serve each node's partitions in place from DATA instead of copying them");
  app->add_flag("--stage", o->stage,
                "Copy this node's partitions to local storage even when DATA is on a local file "
                "system (by default one node copies only from a network or FUSE file system)")
      ->excludes(no_stage);
  app->add_option("--replicas", o->replicas, "Nodes holding each partition (default 1)")
      ->check(CLI::Validator(cli::IntegerIn(1, 1u << 20), "1..1048576"));
  app->add_option("--cache-size", sizes->cache_size,
                  "Bound of the node cache of members fetched from other nodes (default 1G)");
  app->add_option("--fetch-ahead", sizes->fetch_ahead,
                  "A member fetched from another node comes with its neighbours in the aligned "
                  "block of this size of its partition, and a large member read in order with "
                  "its next 1 MiB piece, into the node cache (0 = off; default 1M; turned off "
                  "by itself when most of them leave the cache unread)");
  app->add_option("--timeout", o->timeout_s,
                  "Seconds before a node that does not answer is given up on (EIO, or the next "
                  "replica; default 10)")
      ->check(CLI::Validator(cli::CheckPositive, "NUMBER > 0"));
}

Status FinishOptions(fanrun::NodeOptions* o, const SizeOptions& sizes) {
  for (auto [text, name, out] :
       {std::tuple{&sizes.cache_size, "--cache-size", &o->cache_bytes},
        std::tuple{&sizes.fetch_ahead, "--fetch-ahead", &o->fetch_ahead}}) {
    if (text->empty()) continue;
    auto v = fanrun::ParseSize(*text);
    if (!v.ok()) return Status::Error(std::string(name) + ": " + v.status().message());
    *out = *v;
  }
  return Status::Ok();
}

// The jobs of this user on this host that a `fanrun serve` made, found only in private
// directories (bin/private_dir.h): a job planted by another user is never attached to.
std::vector<std::string> ServedJobs() {
  std::vector<std::string> jobs;
  std::error_code ec;
  for (const std::string& base : fanrun::TrustedJobsBases())
    for (const auto& d : fs::directory_iterator(base, ec)) {
      const std::string name = d.path().filename().string();
      if (name.rfind("job-", 0) == 0 && fs::exists(d.path() / "serve", ec))
        jobs.push_back(name.substr(4));
    }
  std::sort(jobs.begin(), jobs.end());
  jobs.erase(std::unique(jobs.begin(), jobs.end()), jobs.end());
  return jobs;
}

// True while any private base of this user holds the job's directory.
bool JobExists(const std::string& job) {
  std::error_code ec;
  for (const std::string& base : fanrun::TrustedJobsBases())
    if (fs::exists(base + "/job-" + job, ec)) return true;
  return false;
}

Result<std::string> PickJob(const std::string& job) {
  if (!job.empty()) {
    const auto jobs = ServedJobs();
    if (std::find(jobs.begin(), jobs.end(), job) == jobs.end())
      return Status::Error("job '" + job + "': no such served job on this host (see fanrun serve)");
    return job;
  }
  const auto jobs = ServedJobs();
  if (jobs.empty())
    return Status::Error("no served job on this host (start one with fanrun serve)");
  if (jobs.size() > 1)
    return Status::Error(std::to_string(jobs.size()) +
                         " served jobs on this host: choose one with --job");
  return jobs[0];
}

// The rank directories of a served job on this host, in rank order.
std::vector<std::string> RankDirs(const std::string& job) {
  std::vector<std::pair<int, std::string>> dirs;
  std::error_code ec;
  for (const std::string& base : fanrun::TrustedJobsBases())
    for (const auto& d : fs::directory_iterator(base + "/job-" + job, ec)) {
      const std::string name = d.path().filename().string();
      if (name.rfind("rank-", 0) == 0 && fs::exists(d.path() / "agent.sock", ec))
        dirs.emplace_back(std::atoi(name.c_str() + 5), d.path().string());
    }
  std::sort(dirs.begin(), dirs.end());
  std::vector<std::string> out;
  for (auto& [r, d] : dirs) out.push_back(d);
  return out;
}

// Which of the job's ranks on this host a process attaches to: its local rank, else its
// global rank (a launcher that says only that), modulo the ranks there.
int LocalRank() {
  if (const int r = cli::LauncherLocalRank(); r >= 0) return r;
  for (const char* v : {"PMI_RANK", "PMIX_RANK"})
    if (const char* s = std::getenv(v)) return std::atoi(s);
  return 0;
}

Status SendLocal(const std::string& socket_path, io::LocalOp op) {
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_path.c_str(), sizeof addr.sun_path - 1);
  Status st;
  io::LocalRequest req{op, 0};
  io::LocalReply rep{};
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::send(fd, &req, sizeof req, MSG_NOSIGNAL) != sizeof req ||
      ::recv(fd, &rep, sizeof rep, 0) != sizeof rep)
    st = Status::FromErrno(socket_path, errno ? errno : EPROTO);
  ::close(fd);
  return st;
}

int Serve(fanrun::NodeOptions& opt) {
  opt.serve = true;
  fanrun::Node node;
  if (Status s = node.Setup(opt, cli::LaunchedByMpi()); !s.ok()) return Fail(s.message());
  node.StartStaging();
  if (node.rank() == 0)
    std::fprintf(stderr,
                 "fanrun: serving job %s at %s; run programs with: fanrun attach --job %s -- CMD\n",
                 node.job().c_str(), node.mount().c_str(), node.job().c_str());
  g_serving = &node;
  struct sigaction sa {};
  sa.sa_handler = StopServing;
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) ::sigaction(sig, &sa, nullptr);
  node.WaitUntilStopped();
  g_serving = nullptr;
  return 0;
}

int Attach(const std::string& job_arg, std::vector<std::string>& cmd) {
  auto job = PickJob(job_arg);
  if (!job.ok()) return Fail(job.status().message());
  const auto dirs = RankDirs(*job);
  if (dirs.empty()) return Fail("job '" + *job + "' is not ready on this host");
  const std::string& dir = dirs[static_cast<size_t>(LocalRank()) % dirs.size()];
  std::string mount, cache, staged;
  std::getline(std::ifstream(dir + "/mount"), mount);
  std::getline(std::ifstream(dir + "/cache-dir"), cache);
  std::getline(std::ifstream(dir + "/staged"), staged);
  std::string nodes = "1";
  std::getline(std::ifstream(dir + "/nodes"), nodes);
  if (Status s = CheckNotNested(dir + "/namespace.img"); !s.ok()) return Fail(s.message());
  if (Status s =
          Preload(dir + "/namespace.img", mount, dir + "/agent.sock", cache, staged == "1", cmd);
      !s.ok())
    return Fail(s.message());
  std::string staging_from;
  std::getline(std::ifstream(dir + "/staging-from"), staging_from);
  SetStagingFrom(staging_from);
  // The node CMD is attached to (rank-N), of how many; this process's place on its host.
  const std::string rank_dir_name = dir.substr(dir.rfind('/') + 1);
  ::setenv("FANSTORE_RANK", rank_dir_name.substr(5).c_str(), 1);
  ::setenv("FANSTORE_NODES", nodes.c_str(), 1);
  if (const int r = cli::LauncherLocalRank(); r >= 0)
    ::setenv("FANSTORE_LOCAL_RANK", std::to_string(r).c_str(), 1);
  else
    ::unsetenv("FANSTORE_LOCAL_RANK");
  std::vector<char*> args;
  for (auto& c : cmd) args.push_back(c.data());
  args.push_back(nullptr);
  ::execvp(args[0], args.data());  // attach replaces itself: an MPI application keeps its rank
  const int e = errno;
  cli::Error("fanrun", cmd[0] + ": " + std::strerror(e));
  return e == ENOENT ? kExitNotFound : kExitCannotRun;
}

int Stop(const std::string& job_arg) {
  auto job = PickJob(job_arg);
  if (!job.ok()) return Fail(job.status().message());
  const auto dirs = RankDirs(*job);
  if (dirs.empty()) return Fail("job '" + *job + "' is not ready on this host");
  // One rank's agent tells every other rank: the whole job ends.
  if (Status s = SendLocal(dirs[0] + "/agent.sock", io::LocalOp::kStop); !s.ok())
    return Fail("job '" + *job + "': " + s.message());
  for (int i = 0; i < 600; ++i) {  // wait (up to a minute) until it is gone from this host
    if (!JobExists(*job)) return 0;
    ::usleep(100000);
  }
  return Fail("job '" + *job + "': still running a minute after the stop request");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "fanrun: run a command with a packed dataset served from memory and the partition "
      "blobs at a mount point. Alone it serves DATA in place; under mpiexec (one rank per "
      "node) every node stages its share, and members held elsewhere are fetched over MPI."};
  app.set_version_flag("--version", std::string("fanrun ") + FANSTORE_VERSION);
  app.require_subcommand(0, 1);
  fanrun::NodeOptions opt;
  SizeOptions sizes;
  std::string log_level, stats, readahead, job;
  std::vector<std::string> cmd;
  AddNodeOptions(&app, &opt, &sizes, false);  // required unless a subcommand runs
  app.add_option("--log-level", log_level, "off | error | warn | info | debug (FANSTORE_LOG_LEVEL)")
      ->check(CLI::IsMember({"off", "error", "warn", "info", "debug"}));
  app.add_option("--readahead", readahead,
                 "Bytes read around a member that is not in the page cache, so its neighbours "
                 "are cached when they are read (e.g. 1M, 0 = off; default auto: 1M when the "
                 "node's partitions fit in half of the memory) (FANSTORE_READAHEAD)");
  CLI::Option* stats_opt =
      app.add_option("--stats", stats,
                     "At exit, one JSON line per process of CMD (opens, stats, reads, bytes, "
                     "cache hits, ...): on stderr (a copy taken at start, so programs that close "
                     "stderr still report), or appended to FILE if given (FANSTORE_STATS)")
          ->expected(0, 1)
          ->type_name("[FILE]");
  app.add_option("CMD", cmd, "The command and its arguments (after --)");
  app.positionals_at_end();

  fanrun::NodeOptions serve_opt;
  SizeOptions serve_sizes;
  CLI::App* serve = app.add_subcommand(
      "serve",
      "Attach mode: stage and serve DATA until `fanrun stop` (run it under mpiexec, one "
      "rank per node, then start the application with `fanrun attach`)");
  AddNodeOptions(serve, &serve_opt, &serve_sizes, true);
  serve->add_option("--job", serve_opt.job, "Name of the job (default: generated and printed)");
  CLI::App* attach = app.add_subcommand(
      "attach",
      "Run CMD attached to a served job on this host (MPI applications too: it execs "
      "CMD in place, so a rank keeps its identity)");
  attach->add_option("--job", job, "The served job (default: the only one on this host)");
  std::vector<std::string> attach_cmd;
  attach->add_option("CMD", attach_cmd, "The command and its arguments (after --)")->required();
  attach->positionals_at_end();
  CLI::App* stop = app.add_subcommand("stop", "End a served job on every node");
  stop->add_option("--job", job, "The served job (default: the only one on this host)");
  fanrun::DoctorOptions doctor_opt;
  CLI::App* doctor = app.add_subcommand(
      "doctor",
      "Check this machine before a first job: libc's interception plan, io_uring, "
      "/dev/shm, the MPI library and launcher, and a dataset if given. Changes nothing; "
      "exit 0 when no problem is found");
  doctor->add_option("--data", doctor_opt.data, "A packed dataset to look at");
  doctor->add_option("--local-dir", doctor_opt.local_dir, "Where --local-dir would stage");
  doctor->add_option("--libc", doctor_opt.libc, "Plan this libc file instead of the running one");
  doctor->add_flag("--json", doctor_opt.json, "One JSON object instead of the report");
  try {
    app.parse(argc, argv);
    if (app.got_subcommand(serve) || app.got_subcommand(attach) || app.got_subcommand(stop) ||
        app.got_subcommand(doctor)) {
      // the main command's --data is not needed
    } else if (opt.data.empty()) {
      throw CLI::RequiredError("--data");
    } else if (cmd.empty()) {
      throw CLI::RequiredError("CMD");
    }
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    cli::Error("fanrun", std::string(e.what()) + " (see fanrun --help)");
    return cli::kExitUsage;
  }
  if (!log_level.empty()) ::setenv("FANSTORE_LOG_LEVEL", log_level.c_str(), 1);
  // A statistics file named relative to here: every process writes to it from wherever its
  // own working directory is by then (often the read-only mount), so it is made absolute.
  if (stats.empty() && stats_opt->count() > 0) stats = "1";  // --stats with no FILE
  if (stats.empty())
    if (const char* env = std::getenv("FANSTORE_STATS")) stats = env;
  if (!stats.empty() && stats != "1") {
    auto abs = cli::AbsolutePath("--stats " + stats, stats);
    if (!abs.ok()) return Fail(abs.status().message());
    stats = *abs;
  }
  if (!stats.empty()) ::setenv("FANSTORE_STATS", stats.c_str(), 1);
  if (!readahead.empty() && readahead != "auto") {
    auto v = fanrun::ParseSize(readahead);
    if (!v.ok()) return Fail("--readahead: " + v.status().message());
    ::setenv("FANSTORE_READAHEAD", std::to_string(*v).c_str(), 1);
  }

  if (app.got_subcommand(serve)) {
    if (Status s = CheckNotNested(); !s.ok()) return Fail(s.message());
    if (Status s = CheckLauncher(); !s.ok()) return Fail(s.message());
    if (Status s = FinishOptions(&serve_opt, serve_sizes); !s.ok()) return Fail(s.message());
    return Serve(serve_opt);
  }
  if (app.got_subcommand(attach)) return Attach(job, attach_cmd);
  if (app.got_subcommand(stop)) return Stop(job);
  if (app.got_subcommand(doctor)) {
    doctor_opt.preload = FindPreload();
    return fanrun::Doctor(doctor_opt);
  }

  if (Status s = CheckNotNested(); !s.ok()) return Fail(s.message());
  if (Status s = CheckLauncher(); !s.ok()) return Fail(s.message());
  if (Status s = FinishOptions(&opt, sizes); !s.ok()) return Fail(s.message());
  const bool mpi = cli::LaunchedByMpi();
  fanrun::Node node;
  if (Status s = node.Setup(opt, mpi); !s.ok()) return Fail(s.message());
  if (Status s = Preload(node.image_path(), node.mount(), mpi ? node.socket_path() : "",
                         node.cache_dir(), node.staged(), cmd);
      !s.ok())
    return Fail(s.message());
  SetStagingFrom(node.staging_from());
  ChooseMappedReads(node.some_blob());
  // The application's bound on one answer of its agent: every holder's timeout, and slack.
  ::setenv("FANSTORE_AGENT_TIMEOUT", std::to_string(opt.timeout_s * (opt.replicas + 1) + 5).c_str(),
           1);
  ::setenv("FANSTORE_RANK", std::to_string(node.rank()).c_str(), 1);
  ::setenv("FANSTORE_NODES", std::to_string(node.nodes()).c_str(), 1);
  ::setenv("FANSTORE_LOCAL_RANK", std::to_string(node.local_rank()).c_str(), 1);
  auto status = RunCommand(cmd, mpi, &node);
  // Under mpiexec: serves the other nodes until every CMD has finished.
  node.Finish(status.ok() ? ExitCodeOf(*status) : kExitFanrun);
  if (!status.ok()) return Fail(status.status().message());
  return ExitLike(*status);
}
