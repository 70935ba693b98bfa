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
  // Where the read buffer starts past a page boundary. 0, as cat's and fio's: on x86-64 the
  // kernel's copy into a buffer 1-31 bytes past the file's offset modulo 4 KiB is ~4x slower
  // (base/copy_alias.h), and a benchmark of the file system should not measure that; 16 is
  // where malloc puts a buffer of 128 KiB or more.
  uint64_t buffer_offset = 0;
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
