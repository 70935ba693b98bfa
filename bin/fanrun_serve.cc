#include "bin/fanrun_serve.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

#include "bin/cli_util.h"
#include "bin/fanrun_child.h"
#include "bin/launcher.h"
#include "bin/private_dir.h"
#include "io/protocol.h"

namespace fanstore::fanrun {
namespace {

namespace fs = std::filesystem;

Node* g_serving = nullptr;

void StopServing(int) {
  if (g_serving) g_serving->StopFromSignal();
}

// The jobs of this user on this host that a `fanrun serve` made, found only in private
// directories (bin/private_dir.h): a job planted by another user is never attached to.
std::vector<std::string> ServedJobs() {
  std::vector<std::string> jobs;
  std::error_code ec;
  for (const std::string& base : TrustedJobsBases())
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
  for (const std::string& base : TrustedJobsBases())
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
  for (const std::string& base : TrustedJobsBases())
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

}  // namespace

int Serve(NodeOptions& opt) {
  opt.serve = true;
  Node node;
  if (Status s = node.Setup(opt, cli::LaunchedByMpi()); !s.ok()) return Fail(s.message());
  node.StartStaging();
  if (node.rank() == 0)
    cli::Say("fanrun: serving job %s at %s; run programs with: fanrun attach --job %s -- CMD\n",
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
  if (Status s = SetRuntimeEnv(dir + "/namespace.img", mount, dir + "/agent.sock", cache,
                               staged == "1", cmd);
      !s.ok())
    return Fail(s.message());
  std::string staging_from;
  std::getline(std::ifstream(dir + "/staging-from"), staging_from);
  SetStagingFrom(staging_from);
  // The node CMD is attached to (rank-N), of how many; this process's place on its host.
  const std::string rank_dir_name = dir.substr(dir.rfind('/') + 1);
  SetPlaceEnv(std::atoi(rank_dir_name.c_str() + 5), nodes, cli::LauncherLocalRank());
  return ExecInPlace(cmd);  // an MPI application keeps its rank
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

}  // namespace fanstore::fanrun
