// Report: the human table and the JSON document of a run (with the configuration echoed),
// single-process or MPI (per-rank rows and aggregate figures).
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "bin/fsbench/options.h"
#include "bin/fsbench/runner.h"
#include "bin/fsbench/workload.h"

namespace fanstore::fsbench {

struct RankSummary {
  int rank = 0;
  uint64_t items = 0, bytes = 0, errors = 0;
  double seconds = 0;
  double items_per_s() const { return seconds > 0 ? items / seconds : 0; }
};

struct Report {
  Options options;
  uint64_t files_listed = 0, dirs_listed = 0, bytes_listed = 0;
  int ranks = 1;
  RunResult total;                    // merged over ranks; seconds = slowest rank
  std::vector<RankSummary> per_rank;  // MPI only
  std::optional<double> baseline_items_per_s;

  double items_per_s() const;  // aggregate: sum over ranks of each rank's rate
  std::string Table() const;
  std::string Json() const;
};

// Reads "items_per_s" from a JSON document written by `fsbench --json`.
std::optional<double> ReadBaseline(const std::string& file, std::string* error);

}  // namespace fanstore::fsbench
