// Runner: executes a workload from T threads in each of P forked processes and returns the
// merged results. All workers draw from one shared cursor over the sequence of
// (epoch, position) items, so each file is visited exactly once per epoch whatever the
// thread and process counts. Forked workers send their results back through a pipe.
// Thread-safety: Run() is called from one thread; it creates and joins its own workers.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "bin/fsbench/latency_histogram.h"
#include "bin/fsbench/options.h"
#include "bin/fsbench/workload.h"

namespace fanstore::fsbench {

// Measured operations (kMixed is recorded as kStat + kRead).
inline constexpr int kNumOps = 5;
inline constexpr Op kMeasuredOps[kNumOps] = {Op::kStat, Op::kOpenClose, Op::kRead, Op::kReadRange,
                                             Op::kReaddir};
int OpIndex(Op op);

struct OpStats {
  uint64_t ops = 0;
  uint64_t bytes = 0;
  uint64_t errors = 0;
  LatencyHistogram latency;
  void Merge(const OpStats& o);
};

struct RunResult {
  std::array<OpStats, kNumOps> ops;
  uint64_t items = 0;  // files (or directories for readdir) processed
  uint64_t bytes = 0;
  uint64_t errors = 0;
  double seconds = 0;                      // wall time of the measured phase
  std::vector<std::string> error_samples;  // the first few, "path: reason"

  void Merge(const RunResult& o);
  std::string Serialize() const;
  static bool Deserialize(const std::string& s, RunResult* out);
};

// Runs the measured phase for one rank: `rank`/`nranks` select the share of each epoch
// (nranks = 1 and rank = 0 outside MPI, or with --no-split).
RunResult Run(const Options& o, const Workload& w, int rank, int nranks);

// Reads every file once from `threads` threads (the --warmup pass). Returns the errors.
uint64_t Warmup(const Workload& w, unsigned threads, const Options& o);

}  // namespace fanstore::fsbench
