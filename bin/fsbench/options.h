// fsbench's configuration and its command-line parsing (CLI11).
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <string>

namespace fanstore::fsbench {

enum class Op { kStat, kOpenClose, kRead, kReadRange, kReaddir, kMixed };
enum class Pattern { kRandom, kSequential };

const char* OpName(Op op);
const char* PatternName(Pattern p);

struct Options {
  std::string path;
  Op op = Op::kRead;
  Pattern pattern = Pattern::kRandom;
  uint32_t epochs = 1;
  std::string files_from;
  unsigned threads = 1;
  unsigned processes = 1;
  // Each epoch read by `processes` new processes (DataLoader workers without
  // persistent_workers); the parent only forks and waits.
  bool fresh_processes = false;
  double duration = 0;     // seconds; 0: run `epochs` passes
  uint64_t max_files = 0;  // 0: no limit
  bool warmup = false;
  uint64_t seed = 1;
  uint64_t read_size = 256 * 1024;
  uint64_t latency_every = 1;  // time one operation in this many (the rest are only counted)
  bool drop_caches = false;
  bool json = false;
  std::string baseline;   // JSON of a single-rank run, for MPI efficiency
  bool no_split = false;  // MPI: every rank reads every file instead of a 1/N share
  bool quiet = false;
};

struct ParseOutcome {
  bool run = false;  // false: exit with exit_code (help, version, or a usage error)
  int exit_code = 0;
  Options options;
};

ParseOutcome ParseOptions(int argc, const char* const* argv);

}  // namespace fanstore::fsbench
