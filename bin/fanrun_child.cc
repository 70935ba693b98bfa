#include "bin/fanrun_child.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "base/env_names.h"
#include "bin/cli_util.h"
#include "bin/container.h"
#include "bin/fanrun_node_parts.h"
#include "bin/launcher.h"
#include "bin/read_calibration.h"
#include "bin/static_program.h"
#include "runtime/names/mount_ways.h"

extern char** environ;

namespace fanstore::fanrun {
namespace env = fanstore::env;
namespace {

volatile sig_atomic_t g_child = 0;

void Forward(int sig) {
  if (g_child > 0) ::kill(g_child, sig);
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
      const std::string_view c = runtime::NextComponent(&rest);
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

}  // namespace

int Fail(const std::string& msg) {
  if (!msg.empty()) cli::Error("fanrun", msg);
  return kExitFanrun;
}

// A fanrun started by a program that already runs on a dataset would hand its CMD a second
// one in place of the first: the first's files would vanish from under the mount point
// (only fanrun's empty directories stay visible there). One dataset per job, said before
// anything starts. `image`: the namespace image CMD would get, when it is known (attach:
// the same job again is fine).
Status CheckNotNested(const std::string& image) {
  const char* outer = std::getenv(env::kImage);
  if (!outer || !*outer || (!image.empty() && image == outer)) return Status::Ok();
  const char* mount = std::getenv(env::kMount);
  return Status::Error(std::string("already running on a dataset (at ") +
                       (mount && *mount ? mount : "?") +
                       "): one dataset per job; pack the trees together (fanstore pack their "
                       "common parent) or run fanrun outside the first one");
}

std::string FindPreload() {
  if (const char* p = std::getenv(fanstore::env::kPreload); p && *p) return p;
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

Status SetRuntimeEnv(const std::string& image, const std::string& mount, const std::string& agent,
                     const std::string& node_cache, bool staged,
                     const std::vector<std::string>& cmd) {
  const std::string preload = FindPreload();
  if (preload.empty())
    return Status::Error("libfanstore.so not found next to fanrun (set FANSTORE_PRELOAD)");
  std::string ld = preload;
  if (const char* old = std::getenv("LD_PRELOAD"); old && *old) ld += std::string(":") + old;
  ::setenv("LD_PRELOAD", ld.c_str(), 1);
  ::setenv(env::kImage, image.c_str(), 1);
  ::setenv(env::kMount, mount.c_str(), 1);
  // A mount point below a symlink (/scratch -> /lustre/scratch) has a second spelling, the
  // one getcwd and realpath give: the runtime serves both. (The mount point exists by now:
  // fanrun made it if it had to.)
  char real[PATH_MAX];
  const bool resolved = ::realpath(mount.c_str(), real) != nullptr;
  if (resolved && mount != real)
    ::setenv(env::kMountReal, real, 1);
  else
    ::unsetenv(env::kMountReal);
  if (const std::string aliases = resolved ? MountAliases(real, cmd) : ""; !aliases.empty())
    ::setenv(env::kMountAliases, aliases.c_str(), 1);
  else
    ::unsetenv(env::kMountAliases);
  ::setenv(env::kStaged, staged ? "1" : "0", 1);
  if (!agent.empty()) {
    ::setenv(env::kAgent, agent.c_str(), 1);
    ::setenv(env::kNodeCache, node_cache.c_str(), 1);
  } else {
    ::unsetenv(env::kAgent);
    ::unsetenv(env::kNodeCache);
  }
  return Status::Ok();
}

void SetStagingFrom(const std::string& data) {
  if (data.empty())
    ::unsetenv(env::kStagingFrom);
  else
    ::setenv(env::kStagingFrom, data.c_str(), 1);
}

namespace {

// Where the mapped-reads choice measured in `scratch_dir` is kept: in `keep_in`, per file
// system type; "" when nothing is kept.
std::string KeptChoicePath(const std::string& keep_in, const std::string& scratch_dir) {
  struct statfs fs;
  if (keep_in.empty() || ::statfs(scratch_dir.c_str(), &fs) != 0) return "";
  char name[64];
  std::snprintf(name, sizeof name, "/read-choice-%lx", static_cast<unsigned long>(fs.f_type));
  return keep_in + name;
}

// '0' or '1' as kept at `path`, else 0 (none, or not a choice: measured again).
char ReadKeptChoice(const std::string& path) {
  if (path.empty()) return 0;
  char c = 0;
  const int k = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  const bool got = k >= 0 && ::read(k, &c, 1) == 1 && (c == '0' || c == '1');
  if (k >= 0) ::close(k);
  return got ? c : 0;
}

}  // namespace

void ChooseMappedReads(const std::string& blob, const std::string& scratch_dir,
                       const std::string& keep_in) {
  if (std::getenv(env::kMappedReads) || (blob.empty() && scratch_dir.empty())) return;
  std::string file = blob, kept;
  if (!scratch_dir.empty()) {
    // Measured on a file of its own, the choice is the machine's and the file system's:
    // kept for later jobs (in a private directory, so nobody else's choice is taken).
    kept = KeptChoicePath(keep_in, scratch_dir);
    if (const char c = ReadKeptChoice(kept); c != 0) {
      ::setenv(env::kMappedReads, c == '1' ? "1" : "0", 1);
      spdlog::debug("reads of page-cached members: {} (kept from a measurement in {})",
                    c == '1' ? "copied from the blob's mapping" : "pread", kept);
      return;
    }
    file = scratch_dir + "/calibration";
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return;
    const std::string chunk(1 << 20, '\x5a');
    bool wrote = true;
    for (int i = 0; i < 8 && wrote; ++i)
      wrote = ::write(fd, chunk.data(), chunk.size()) == static_cast<ssize_t>(chunk.size());
    ::close(fd);
    if (!wrote) {
      ::unlink(file.c_str());
      return;
    }
  }
  const auto cost = MeasureReadCost(file);
  if (!scratch_dir.empty()) ::unlink(file.c_str());
  if (!cost) return;
  const bool mapped = MappedReadsPay(*cost);
  ::setenv(env::kMappedReads, mapped ? "1" : "0", 1);
  if (!kept.empty()) (void)WriteFile(kept, mapped ? "1" : "0");
  spdlog::debug(
      "reads of page-cached members: {} (per 64 KiB: pread {:.0f} ns, from a new mapping {:.0f} "
      "ns, again {:.0f} ns)",
      mapped ? "copied from the blob's mapping" : "pread", cost->pread, cost->map_first,
      cost->map_again);
}

void SetPlaceEnv(int rank, const std::string& nodes, int local_rank) {
  ::setenv(env::kRank, std::to_string(rank).c_str(), 1);
  ::setenv(env::kNodes, nodes.c_str(), 1);
  if (local_rank >= 0)
    ::setenv(env::kLocalRank, std::to_string(local_rank).c_str(), 1);
  else
    ::unsetenv(env::kLocalRank);
}

Result<int> RunCommand(std::vector<std::string>& cmd, bool scrub, Node* node) {
  // (a container runtime runs without the library, its processes inside with it)
  if (const std::string what =
          RecognizeContainer(cmd) == ContainerRuntime::kNone ? WithoutRuntime(cmd[0]) : "";
      !what.empty())
    spdlog::warn(
        "{}: the runtime cannot load into it, so it is not served (it sees the mount "
        "point {} as the kernel has it)",
        what, node->mount());
  const pid_t pid = ::fork();
  if (pid < 0) return Status::FromErrno("fork", errno);
  if (pid == 0) {
    if (scrub) ScrubLauncherEnvironment();
    _exit(ExecInPlace(cmd));
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

int ExitCodeOf(int status) {
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : kExitFanrun;
}

int ExitLike(int status) {
  if (WIFSIGNALED(status)) {
    ::signal(WTERMSIG(status), SIG_DFL);
    ::raise(WTERMSIG(status));
  }
  return ExitCodeOf(status);
}

int ExecInPlace(std::vector<std::string>& cmd) {
  std::vector<char*> args;
  for (auto& c : cmd) args.push_back(c.data());
  args.push_back(nullptr);
  ::execvp(args[0], args.data());
  const int e = errno;
  cli::Error("fanrun", cmd[0] + ": " + std::strerror(e));
  return e == ENOENT ? kExitNotFound : kExitCannotRun;
}

}  // namespace fanstore::fanrun
