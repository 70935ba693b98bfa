#include "bin/fsbench/options.h"

#include <CLI/CLI.hpp>
#include <map>

#include "bin/cli_util.h"

namespace fanstore::fsbench {

const char* OpName(Op op) {
  switch (op) {
    case Op::kStat:
      return "stat";
    case Op::kOpenClose:
      return "open-close";
    case Op::kRead:
      return "read";
    case Op::kReadRange:
      return "read-range";
    case Op::kReaddir:
      return "readdir";
    case Op::kMixed:
      return "mixed";
  }
  return "?";
}

const char* PatternName(Pattern p) {
  return p == Pattern::kRandom ? "random" : "sequential";
}

ParseOutcome ParseOptions(int argc, const char* const* argv) {
  ParseOutcome out;
  Options& o = out.options;
  CLI::App app{
      "fsbench: a file-system microbenchmark of the deep-learning input pattern. It walks PATH\n"
      "once (untimed), then stats, opens or reads every file in a shuffled order each epoch,\n"
      "from threads and forked processes like DataLoader workers, and reports files/s, MB/s\n"
      "and latency percentiles. Under `mpiexec -n N` every rank runs the load (by default on\n"
      "its own 1/N share of each epoch, like DistributedSampler) and rank 0 reports."};
  app.set_version_flag("--version", std::string("fsbench ") + FANSTORE_VERSION);
  std::string op = "read", pattern = "random";
  app.add_option("PATH", o.path, "Directory to measure")->required();
  app.add_option("--op", op, "stat | open-close | read | read-range | readdir | mixed")
      ->capture_default_str();
  app.add_option("--pattern", pattern, "random (a new permutation each epoch) | sequential")
      ->capture_default_str();
  app.add_option("--epochs", o.epochs, "Passes over the file list")
      ->capture_default_str()
      ->check(CLI::Validator(cli::IntegerIn(1, 1000000u), "1..1000000"));
  app.add_option("--files-from", o.files_from,
                 "File list (one path per line, relative to PATH or absolute) instead of a walk");
  app.add_option("--threads,-t", o.threads, "Threads per process")
      ->capture_default_str()
      ->check(CLI::Validator(cli::IntegerIn(1, 1024u), "1..1024"));
  app.add_option("--processes,-p", o.processes, "Forked worker processes")
      ->capture_default_str()
      ->check(CLI::Validator(cli::IntegerIn(1, 256u), "1..256"));
  auto* fresh = app.add_flag("--fresh-processes", o.fresh_processes,
                             "Fork --processes new workers for each epoch, as a DataLoader "
                             "without persistent_workers does (the parent reads nothing)");
  app.add_option("--duration", o.duration, "Run for S seconds (epochs repeat) instead of --epochs")
      ->check(CLI::Validator(cli::CheckPositive, "NUMBER > 0"))
      ->excludes(fresh);
  app.add_option("--files", o.max_files, "Stop after N files (operations) in all")
      ->check(CLI::Validator(cli::CheckPositive, "NUMBER > 0"));
  app.add_flag("--warmup", o.warmup, "Read every file once, untimed, before measuring");
  app.add_option("--seed", o.seed, "Seed of the permutations and random ranges")
      ->capture_default_str();
  app.add_option("--read-size", o.read_size, "Bytes per read call (read-range: largest range)")
      ->capture_default_str()
      ->check(CLI::Validator(cli::IntegerIn(1, uint64_t{1} << 30), "1..1073741824"));
  app.add_option("--buffer-offset", o.buffer_offset,
                 "Bytes past a page boundary where the read buffer starts (16: where malloc "
                 "puts a large buffer, which x86-64 copies file data into up to 4x slower)")
      ->capture_default_str()
      ->check(CLI::Validator(cli::IntegerIn(0, 4095), "0..4095"));
  app.add_option("--latency-every", o.latency_every,
                 "Time one operation in N for the latency percentiles (files/s counts them all): "
                 "two clock reads per timed operation are ~10% of a stat served from memory")
      ->capture_default_str()
      ->check(CLI::Validator(cli::IntegerIn(1, uint64_t{1} << 20), "1..1048576"));
  app.add_flag("--drop-caches", o.drop_caches,
               "sync and drop the page cache before measuring (needs root)");
  app.add_flag("--json", o.json, "Print the results as JSON (configuration included)");
  app.add_option("--baseline", o.baseline, "JSON of a 1-rank run: MPI mode reports efficiency");
  app.add_flag("--no-split", o.no_split, "MPI: every rank reads every file");
  app.add_flag("--quiet,-q", o.quiet, "Human output: only the table");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    out.exit_code = e.get_exit_code() == 0 ? app.exit(e) : cli::kExitUsage;
    if (e.get_exit_code() != 0)
      cli::Error("fsbench", std::string(e.what()) + " (see fsbench --help)");
    return out;
  }
  static const std::map<std::string, Op> ops = {
      {"stat", Op::kStat},       {"open-close", Op::kOpenClose},
      {"read", Op::kRead},       {"read-range", Op::kReadRange},
      {"readdir", Op::kReaddir}, {"mixed", Op::kMixed}};
  if (!ops.contains(op)) {
    cli::Error("fsbench", "--op: unknown operation '" + op + "' (see fsbench --help)");
    out.exit_code = cli::kExitUsage;
    return out;
  }
  if (pattern != "random" && pattern != "sequential") {
    cli::Error("fsbench", "--pattern: expected random or sequential, got '" + pattern + "'");
    out.exit_code = cli::kExitUsage;
    return out;
  }
  o.op = ops.at(op);
  o.pattern = pattern == "random" ? Pattern::kRandom : Pattern::kSequential;
  out.run = true;
  return out;
}

}  // namespace fanstore::fsbench
