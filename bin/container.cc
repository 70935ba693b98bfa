#include "bin/container.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <utility>

#include "base/env_names.h"
#include "bin/cli_util.h"
#include "bin/static_program.h"

extern char** environ;

namespace fanstore::fanrun {
namespace env = fanstore::env;
namespace {

using Vars = std::vector<std::pair<std::string, std::string>>;

struct Bind {
  std::string src, dst;
};

std::string Basename(const std::string& p) {
  return p.substr(p.rfind('/') + 1);
}
std::string Dirname(const std::string& p) {
  const size_t slash = p.rfind('/');
  return slash == 0 ? "/" : p.substr(0, slash);
}
bool Under(const std::string& path, const std::string& dir) {
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
                         path[dir.size()] == '/');
}
bool IsDir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The variables the processes inside get: every FANSTORE_* of this environment (fanrun has
// set the runtime's by now) and LD_PRELOAD naming the library where it is bound.
Vars InsideVariables(const std::string& inner_preload) {
  Vars vars;
  for (char** e = environ; *e; ++e) {
    const std::string_view kv(*e);
    const size_t eq = kv.find('=');
    if (eq == std::string_view::npos || kv.substr(0, std::strlen(env::kPrefix)) != env::kPrefix)
      continue;
    vars.emplace_back(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  vars.emplace_back("LD_PRELOAD", inner_preload);
  return vars;
}

// The container runtime itself runs without the runtime library: LD_PRELOAD as the user had
// it (SetRuntimeEnv put the library first).
void RestoreHostPreload(const std::string& preload) {
  const char* ld = std::getenv("LD_PRELOAD");
  if (!ld) return;
  std::string v = ld;
  if (v.compare(0, preload.size(), preload) != 0) return;
  v.erase(0, preload.size());
  if (!v.empty() && v[0] == ':') v.erase(0, 1);
  if (v.empty())
    ::unsetenv("LD_PRELOAD");
  else
    ::setenv("LD_PRELOAD", v.c_str(), 1);
}

// Every runtime's bind option splits on ':', Apptainer's list also on ',': a path with one
// would be bound somewhere else, or not at all.
Status Bindable(const std::string& runtime, const Bind& b, bool comma) {
  for (const std::string* path : {&b.src, &b.dst})
    if (path->find(':') != std::string::npos || (comma && path->find(',') != std::string::npos))
      return Status::Error(runtime + " cannot be handed " + *path +
                           ": its binds cannot take a path with ':'" + (comma ? " or ','" : "") +
                           " (move it, or give another --local-dir)");
  return Status::Ok();
}

// Apptainer and SingularityCE take binds and the inside environment from variables, which
// also pass `--cleanenv` and `--containall` (PREFIX_BIND, PREFIXENV_NAME).
Status HandToApptainer(const std::string& prefix, const std::vector<Bind>& binds,
                       const Vars& vars) {
  const std::string bind_var = prefix + "_BIND";
  std::string list;
  if (const char* old = std::getenv(bind_var.c_str()); old && *old) list = old;
  for (const Bind& b : binds) {
    FANSTORE_RETURN_IF_ERROR(
        Bindable(prefix == "APPTAINER" ? "apptainer" : "singularity", b, true));
    list += (list.empty() ? "" : ",") + b.src + ":" + b.dst;
  }
  ::setenv(bind_var.c_str(), list.c_str(), 1);
  for (const auto& [name, value] : vars)
    ::setenv((prefix + "ENV_" + name).c_str(), value.c_str(), 1);
  return Status::Ok();
}

// ch-run's command line: where IMAGE and CMD's program are, and whether /tmp is private.
struct ChRunLine {
  size_t image = 0;    // 0: not found
  size_t program = 0;  // 0: not found
  bool private_tmp = false;
};

ChRunLine ParseChRun(const std::vector<std::string>& cmd) {
  ChRunLine line;
  for (size_t i = 1; i < cmd.size(); ++i) {
    const std::string& a = cmd[i];
    if (a == "--") break;
    if (a.size() > 1 && a[0] == '-' && a[1] == '-') {
      if (a == "--private-tmp") line.private_tmp = true;
      for (const char* takes : {"--bind", "--cd", "--gid", "--mount", "--storage", "--uid",
                                "--unset-env", "--join-ct", "--join-pid", "--join-tag"})
        if (a == takes) ++i;  // (the value follows)
      continue;
    }
    if (a.size() > 1 && a[0] == '-') {
      for (size_t k = 1; k < a.size(); ++k) {
        if (a[k] == 't') line.private_tmp = true;
        if (std::strchr("bcgmsu", a[k])) {
          if (k + 1 == a.size()) ++i;  // the value is the next word, else the rest of this one
          break;
        }
      }
      continue;
    }
    line.image = i;
    break;
  }
  if (line.image == 0) return line;
  for (size_t i = line.image + 1; i < cmd.size(); ++i)
    if (cmd[i] == "--") {
      if (i + 1 < cmd.size()) line.program = i + 1;
      break;
    }
  return line;
}

// ch-run binds only onto directories the image has (it cannot make one in a read-only
// image); it shares the host's /dev, and /tmp unless --private-tmp.
Status HandToChRun(const std::vector<Bind>& binds, const Vars& vars,
                   std::vector<std::string>* cmd) {
  const ChRunLine line = ParseChRun(*cmd);
  if (line.image == 0) return Status::Error("ch-run: no IMAGE in the command");
  const std::string image = (*cmd)[line.image];
  const bool image_dir = IsDir(image);
  std::vector<std::string> opts;
  for (const Bind& b : binds) {
    const bool shared = Under(b.dst, "/dev") || (!line.private_tmp && Under(b.dst, "/tmp"));
    if (shared && b.src == b.dst) continue;  // the host's own, seen as it is
    if (!shared && image_dir && !IsDir(image + b.dst))
      return Status::Error("ch-run cannot bind " + b.src + " into " + image +
                           ": the image has no " + b.dst +
                           " (a --local-dir under /tmp or /dev/shm is shared with it)");
    FANSTORE_RETURN_IF_ERROR(Bindable("ch-run", b, false));
    opts.push_back("--bind=" + b.src + ":" + b.dst);
  }
  for (const auto& [name, value] : vars) opts.push_back("--set-env=" + name + "=" + value);
  if (image_dir && line.program != 0) {
    const std::string why = WithoutRuntime((*cmd)[line.program], image);
    if (!why.empty())
      return Status::Error(why + " in " + image + ": the runtime cannot load into it");
  }
  // (last before IMAGE: they come after the user's own --unset-env and --bind)
  cmd->insert(cmd->begin() + static_cast<long>(line.image), opts.begin(), opts.end());
  return Status::Ok();
}

// podman run and enroot start take them as options after their subcommand.
Status HandAsOptions(const char* runtime, const char* subcommand, const char* bind_opt,
                     const char* env_opt, const std::vector<Bind>& binds, const Vars& vars,
                     std::vector<std::string>* cmd) {
  size_t at = 0;
  for (size_t i = 1; i < cmd->size() && at == 0; ++i)
    if ((*cmd)[i] == subcommand) at = i + 1;
  if (at == 0)
    return Status::Error(std::string(runtime) + ": the dataset is handed only to `" + runtime +
                         " " + subcommand + "`");
  std::vector<std::string> opts;
  for (const Bind& b : binds) {
    FANSTORE_RETURN_IF_ERROR(Bindable(runtime, b, false));
    opts.push_back(bind_opt);
    opts.push_back(b.src + ":" + b.dst);
  }
  for (const auto& [name, value] : vars) {
    opts.push_back(env_opt);
    opts.push_back(name + "=" + value);
  }
  cmd->insert(cmd->begin() + static_cast<long>(at), opts.begin(), opts.end());
  return Status::Ok();
}

}  // namespace

ContainerRuntime RecognizeContainer(const std::vector<std::string>& cmd) {
  if (cmd.empty()) return ContainerRuntime::kNone;
  const std::string name = Basename(cmd[0]);
  if (name == "apptainer") return ContainerRuntime::kApptainer;
  if (name == "singularity") return ContainerRuntime::kSingularity;
  if (name == "ch-run") return ContainerRuntime::kCharliecloud;
  if (name == "podman" || name == "podman-hpc") return ContainerRuntime::kPodman;
  if (name == "enroot") return ContainerRuntime::kEnroot;
  return ContainerRuntime::kNone;
}

const char* ContainerRuntimeName(ContainerRuntime rt) {
  switch (rt) {
    case ContainerRuntime::kApptainer:
      return "apptainer";
    case ContainerRuntime::kSingularity:
      return "singularity";
    case ContainerRuntime::kCharliecloud:
      return "ch-run";
    case ContainerRuntime::kPodman:
      return "podman";
    case ContainerRuntime::kEnroot:
      return "enroot";
    default:
      return "";
  }
}

Result<std::string> HandToContainer(ContainerRuntime rt, const ContainerJob& job,
                                    std::vector<std::string>* cmd) {
  // Where the container sees the job's directory: at its own path for ch-run, which shares
  // the host's /dev; elsewhere at /fanstore/JOB, since Apptainer's --contain and Podman make
  // a /dev/shm of their own, below which nothing can be bound.
  const bool same = rt == ContainerRuntime::kCharliecloud;
  const std::string inner_job = same ? job.job_dir : "/fanstore/" + Basename(job.job_dir);
  const auto inside = [&](const std::string& host) {
    return Under(host, job.job_dir) ? inner_job + host.substr(job.job_dir.size()) : host;
  };
  std::vector<Bind> binds;
  binds.push_back({job.job_dir, inner_job});  // (first: the next two go inside it)
  const std::string lib = job.rank_dir + "/lib";
  if (::mkdir(lib.c_str(), 0700) != 0 && errno != EEXIST) return Status::FromErrno(lib, errno);
  binds.push_back({Dirname(job.preload), inside(lib)});
  if (!job.data.empty() && IsDir(job.rank_dir + "/data"))
    binds.push_back({job.data, inside(job.rank_dir + "/data")});
  std::vector<std::string> own = {job.local_dir};
  for (const char* name : {env::kStats, env::kLogFile})
    if (const char* f = std::getenv(name); f && f[0] == '/') own.push_back(Dirname(f));
  for (const std::string& dir : own) {
    bool covered = Under(dir, job.job_dir);
    for (const Bind& b : binds) covered = covered || Under(dir, b.src);
    if (!covered) binds.push_back({dir, dir});
  }
  const std::string mark = job.rank_dir + "/served";
  ::unlink(mark.c_str());
  ::setenv(env::kServedMark, mark.c_str(), 1);
  RestoreHostPreload(job.preload);
  Vars vars = InsideVariables(inside(lib) + "/" + Basename(job.preload));
  for (auto& [name, value] : vars) value = inside(value);
  if (!same) vars.emplace_back(env::kPathMap, job.job_dir + "\n" + inner_job);
  Status st;
  switch (rt) {
    case ContainerRuntime::kApptainer:
      st = HandToApptainer("APPTAINER", binds, vars);
      break;
    case ContainerRuntime::kSingularity:
      st = HandToApptainer("SINGULARITY", binds, vars);
      break;
    case ContainerRuntime::kCharliecloud:
      st = HandToChRun(binds, vars, cmd);
      break;
    case ContainerRuntime::kPodman:
      st = HandAsOptions("podman", "run", "--volume", "--env", binds, vars, cmd);
      break;
    case ContainerRuntime::kEnroot:
      st = HandAsOptions("enroot", "start", "--mount", "--env", binds, vars, cmd);
      break;
    case ContainerRuntime::kNone:
      break;
  }
  if (!st.ok()) return st;
  return mark;
}

void SayIfUnserved(ContainerRuntime rt, const std::string& mark, const std::string& preload,
                   const std::string& mount) {
  if (::access(mark.c_str(), F_OK) == 0) return;
  cli::Error("fanrun",
             std::string("no process in the ") + ContainerRuntimeName(rt) +
                 " container loaded the runtime (" + preload + "), so none was served and " +
                 mount +
                 " was the image's own: the container did not start, the program is statically "
                 "linked, the image has no dynamic loader, or an option of the container "
                 "runtime dropped LD_PRELOAD");
}

}  // namespace fanstore::fanrun
