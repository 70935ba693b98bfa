// fanrun: runs a command with a packed dataset visible at a mount point, served by the
// preload runtime. Single node: every partition is read in place from DATA.
//   fanrun --data DATA [--mount PATH] [--log-level L] [--stats [FILE]] -- CMD [ARGS...]
// Exit status: CMD's own (a CMD killed by a signal kills fanrun with the same signal);
// 125 when fanrun itself fails before CMD starts, 126 if CMD cannot run, 127 if not found.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bin/cli_util.h"
#include "meta/dataset.h"
#include "meta/namespace_image.h"

namespace {

namespace fs = std::filesystem;
using namespace fanstore;

constexpr int kExitFanrun = 125, kExitCannotRun = 126, kExitNotFound = 127;
volatile sig_atomic_t g_child = 0;

void Forward(int sig) {
  if (g_child > 0) ::kill(g_child, sig);
}

int Fail(const std::string& msg) {
  cli::Error("fanrun", msg);
  return kExitFanrun;
}

// libfanstore.so next to this executable: installed (../lib) or in the build tree.
std::string FindPreload() {
  if (const char* p = std::getenv("FANSTORE_PRELOAD"); p && *p) return p;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  for (const char* rel : {"../lib/libfanstore.so", "../lib/x86_64-linux-gnu/libfanstore.so",
                          "../runtime/libfanstore.so"}) {
    const fs::path p = (exe.parent_path() / rel).lexically_normal();
    if (fs::exists(p, ec)) return p.string();
  }
  return "";
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
  for (auto it = parents.rbegin(); it != parents.rend(); ++it)
    if (::mkdir(it->c_str(), 0755) == 0) made.push_back(*it);
  for (uint32_t i = 1; i < ns.size(); ++i) {
    const auto& e = ns.entry(i);
    if (!S_ISDIR(e.mode)) continue;
    const std::string p = mount + "/" + std::string(ns.path(e));
    if (::mkdir(p.c_str(), 0755) == 0) made.push_back(p);
  }
  return made;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "fanrun: run a command with a packed dataset served from memory and the partition "
      "blobs at a mount point (default: the source path recorded at pack time)."};
  app.set_version_flag("--version", std::string("fanrun ") + FANSTORE_VERSION);
  std::string data, mount, log_level, stats;
  std::vector<std::string> cmd;
  app.add_option("--data,-d", data, "Packed dataset directory (manifest + part-*.fsb)")->required();
  app.add_option("--mount,-m", mount,
                 "Where the dataset appears (absolute; shadows a real directory there)");
  app.add_option("--log-level", log_level,
                 "off | error | warn | info | debug (FANSTORE_LOG_LEVEL)");
  app.add_option("--stats", stats, "Write per-process statistics at exit: 1 for stderr, or a file")
      ->expected(0, 1)
      ->default_str("1");
  app.add_option("CMD", cmd, "The command and its arguments (after --)")->required();
  app.positionals_at_end();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    cli::Error("fanrun", std::string(e.what()) + " (see fanrun --help)");
    return cli::kExitUsage;
  }

  auto ds = meta::Dataset::Open(data);
  if (!ds.ok()) return Fail(ds.status().message());
  if (mount.empty()) mount = (*ds)->manifest().source;
  if (mount.empty() || mount[0] != '/')
    return Fail("--mount: must be an absolute path, got '" + mount + "'");
  while (mount.size() > 1 && mount.back() == '/') mount.pop_back();
  const std::string preload = FindPreload();
  if (preload.empty())
    return Fail("libfanstore.so not found next to fanrun (set FANSTORE_PRELOAD)");

  // Publish the namespace image for this job.
  std::error_code ec;
  const std::string base = "/dev/shm/fanstore-" + std::to_string(::getuid());
  ::mkdir(base.c_str(), 0700);
  const std::string job = base + "/job-" + std::to_string(::getpid());
  fs::remove_all(job, ec);
  if (::mkdir(job.c_str(), 0700) != 0) return Fail(job + ": " + std::strerror(errno));
  std::vector<std::string> parts;
  const std::string abs_data = fs::absolute(data, ec).lexically_normal().string();
  for (uint32_t p = 0; p < (*ds)->partitions().size(); ++p)
    parts.push_back(abs_data + "/" + meta::PartitionFileName(p));
  const std::string image = meta::BuildNamespaceImage(**ds, parts);
  const std::string image_path = job + "/namespace.img";
  {
    std::ofstream out(image_path, std::ios::binary);
    out.write(image.data(), static_cast<std::streamsize>(image.size()));
    if (!out) {
      fs::remove_all(job, ec);
      return Fail(image_path + ": cannot write the namespace image");
    }
  }
  auto view =
      meta::NamespaceView::Attach({reinterpret_cast<const uint8_t*>(image.data()), image.size()});
  const std::vector<std::string> skeleton =
      view.ok() ? MakeSkeleton(*view, mount) : std::vector<std::string>{};

  std::string ld = preload;
  if (const char* old = std::getenv("LD_PRELOAD"); old && *old) ld += std::string(":") + old;
  ::setenv("LD_PRELOAD", ld.c_str(), 1);
  ::setenv("FANSTORE_IMAGE", image_path.c_str(), 1);
  ::setenv("FANSTORE_MOUNT", mount.c_str(), 1);
  if (!log_level.empty()) ::setenv("FANSTORE_LOG_LEVEL", log_level.c_str(), 1);
  if (!stats.empty()) ::setenv("FANSTORE_STATS", stats.c_str(), 1);

  int status = 0;
  const pid_t pid = ::fork();
  if (pid < 0) return Fail(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    std::vector<char*> args;
    for (auto& c : cmd) args.push_back(c.data());
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    const int e = errno;
    cli::Error("fanrun", cmd[0] + ": " + std::strerror(e));
    _exit(e == ENOENT ? kExitNotFound : kExitCannotRun);
  }
  g_child = pid;
  struct sigaction sa {};
  sa.sa_handler = Forward;
  for (int sig : {SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) ::sigaction(sig, &sa, nullptr);
  signal(SIGINT, SIG_IGN);  // the terminal delivers it to CMD directly
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }

  for (auto it = skeleton.rbegin(); it != skeleton.rend(); ++it) ::rmdir(it->c_str());
  fs::remove_all(job, ec);
  if (WIFSIGNALED(status)) {
    ::signal(WTERMSIG(status), SIG_DFL);
    ::raise(WTERMSIG(status));
    return 128 + WTERMSIG(status);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : kExitFanrun;
}
