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
// The command line; CMD's environment and life are in bin/fanrun_child.h, the node in
// bin/fanrun_node.h, attach mode in bin/fanrun_serve.h.
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include "base/env_names.h"
#include "bin/cli_util.h"
#include "bin/container.h"
#include "bin/fanrun_child.h"
#include "bin/fanrun_doctor.h"
#include "bin/fanrun_node.h"
#include "bin/fanrun_serve.h"
#include "bin/launcher.h"

namespace {

using namespace fanstore;
using namespace fanstore::fanrun;

// Options given as sizes ("1G"), parsed after CLI11 by FinishOptions.
struct SizeOptions {
  std::string cache_size, fetch_ahead;
};

void AddNodeOptions(CLI::App* app, NodeOptions* o, SizeOptions* sizes, bool require) {
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
                "Copy this node's partitions to local storage while the command runs, "
                "whatever DATA's file system (by default one node copies from a network or "
                "FUSE file system, and from a local disk only to huge pages in /dev/shm that "
                "half of the memory holds); several nodes copy while it runs instead of before "
                "it starts")
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

Status FinishOptions(NodeOptions* o, const SizeOptions& sizes) {
  for (auto [text, name, out] :
       {std::tuple{&sizes.cache_size, "--cache-size", &o->cache_bytes},
        std::tuple{&sizes.fetch_ahead, "--fetch-ahead", &o->fetch_ahead}}) {
    if (text->empty()) continue;
    auto v = ParseSize(*text);
    if (!v.ok()) return Status::Error(std::string(name) + ": " + v.status().message());
    *out = *v;
  }
  return Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "fanrun: run a command with a packed dataset served from memory and the partition "
      "blobs at a mount point. Alone, it copies DATA to node-local storage while the command "
      "runs where the copy reads faster (DATA on a network or FUSE file system; on a local "
      "disk, to /dev/shm in huge pages when it fits in half of the memory, on the time the "
      "command leaves idle), else serves it in place; under mpiexec (one rank per node) "
      "every node stages its share, and members held elsewhere are fetched over MPI. Quiet "
      "unless something is wrong (--verbose says what it does)."};
  app.set_version_flag("--version", std::string("fanrun ") + FANSTORE_VERSION);
  app.require_subcommand(0, 1);
  NodeOptions opt;
  SizeOptions sizes;
  std::string log_level, stats, readahead, job;
  std::vector<std::string> cmd;
  bool verbose = false;
  AddNodeOptions(&app, &opt, &sizes, false);  // required unless a subcommand runs
  app.add_flag("--verbose,-v", verbose,
               "Say on stderr what each node does with DATA and why, as the job starts and as "
               "its copy ends (by default fanrun prints only warnings and errors, and one line "
               "from rank 0 of a job of several nodes) (FANSTORE_VERBOSE)");
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

  NodeOptions serve_opt;
  SizeOptions serve_sizes;
  CLI::App* serve = app.add_subcommand(
      "serve",
      "Attach mode: stage and serve DATA until `fanrun stop` (run it under mpiexec, one "
      "rank per node, then start the application with `fanrun attach`)");
  AddNodeOptions(serve, &serve_opt, &serve_sizes, true);
  serve->add_option("--job", serve_opt.job, "Name of the job (default: generated and printed)");
  serve->add_flag("--verbose,-v", verbose, "As fanrun --verbose");
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
  DoctorOptions doctor_opt;
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
  if (!log_level.empty()) ::setenv(fanstore::env::kLogLevel, log_level.c_str(), 1);
  if (verbose) ::setenv(fanstore::env::kVerbose, "1", 1);
  // A statistics file named relative to here: every process writes to it from wherever its
  // own working directory is by then (often the read-only mount), so it is made absolute.
  if (stats.empty() && stats_opt->count() > 0) stats = "1";  // --stats with no FILE
  if (stats.empty())
    if (const char* env = std::getenv(env::kStats)) stats = env;
  if (!stats.empty() && stats != "1") {
    auto abs = cli::AbsolutePath("--stats " + stats, stats);
    if (!abs.ok()) return Fail(abs.status().message());
    stats = *abs;
  }
  if (!stats.empty()) ::setenv(env::kStats, stats.c_str(), 1);
  if (!readahead.empty() && readahead != "auto") {
    auto v = ParseSize(readahead);
    if (!v.ok()) return Fail("--readahead: " + v.status().message());
    ::setenv(env::kReadahead, std::to_string(*v).c_str(), 1);
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
    return Doctor(doctor_opt);
  }

  if (Status s = CheckNotNested(); !s.ok()) return Fail(s.message());
  if (Status s = CheckLauncher(); !s.ok()) return Fail(s.message());
  if (Status s = FinishOptions(&opt, sizes); !s.ok()) return Fail(s.message());
  const bool mpi = cli::LaunchedByMpi();
  Node node;
  if (Status s = node.Setup(opt, mpi); !s.ok()) return Fail(s.message());
  if (Status s = SetRuntimeEnv(node.image_path(), node.mount(), mpi ? node.socket_path() : "",
                               node.cache_dir(), node.staged(), cmd);
      !s.ok())
    return Fail(s.message());
  SetStagingFrom(node.staging_from());
  ::setenv(env::kData, node.data_dir().c_str(), 1);
  // (a copy being made from a shared file system: measured on a file of the local directory,
  // where the copy is)
  if (node.staging_from().empty())
    ChooseMappedReads(node.some_blob());
  else
    ChooseMappedReads("", node.local_dir(), node.kept_base());
  // The application's bound on one answer of its agent: every holder's timeout, and slack.
  ::setenv(env::kAgentTimeout, std::to_string(opt.timeout_s * (opt.replicas + 1) + 5).c_str(), 1);
  SetPlaceEnv(node.rank(), std::to_string(node.nodes()), node.local_rank());
  // A container runtime as CMD: handed the library, the job's files and the variables in
  // its own way (bin/container.h).
  const ContainerRuntime container = RecognizeContainer(cmd);
  std::string served_mark;
  if (container != ContainerRuntime::kNone) {
    const std::string& rank_dir = node.rank_dir();
    auto mark = HandToContainer(container,
                                {rank_dir.substr(0, rank_dir.rfind('/')), rank_dir,
                                 node.local_dir(), node.data_dir(), FindPreload()},
                                &cmd);
    if (!mark.ok()) return Fail(mark.status().message());
    served_mark = *mark;
  }
  auto status = RunCommand(cmd, mpi, &node);
  if (status.ok() && !served_mark.empty())
    SayIfUnserved(container, served_mark, FindPreload(), node.mount());
  // Under mpiexec: serves the other nodes until every CMD has finished.
  node.Finish(status.ok() ? ExitCodeOf(*status) : kExitFanrun);
  if (!status.ok()) return Fail(status.status().message());
  return ExitLike(*status);
}
