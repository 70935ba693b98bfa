// fsbench: the deep-learning I/O microbenchmark. See `fsbench --help` and the README.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "bin/cli_util.h"
#include "bin/fsbench/mpi_mode.h"
#include "bin/fsbench/options.h"
#include "bin/fsbench/report.h"
#include "bin/fsbench/runner.h"
#include "bin/fsbench/workload.h"

namespace {

using namespace fanstore;
using namespace fanstore::fsbench;

// sync, then drop the page cache; a one-line reason when not permitted.
Status DropCaches() {
  ::sync();
  const int fd = ::open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
  if (fd < 0 || ::write(fd, "3\n", 2) != 2) {
    const int e = errno;
    if (fd >= 0) ::close(fd);
    return Status::Error(std::string("--drop-caches: /proc/sys/vm/drop_caches: ") +
                         std::strerror(e) +
                         " (needs root outside a container; leave the option out for a warm run)");
  }
  ::close(fd);
  return Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  ParseOutcome parsed = ParseOptions(argc, argv);
  if (!parsed.run) return parsed.exit_code;
  const Options& o = parsed.options;
  std::string mpi_error;
  MpiContext mpi = MpiStart(&argc, &argv, &mpi_error);
  if (!mpi_error.empty()) {
    cli::Error("fsbench", mpi_error);
    return cli::kExitFailure;
  }
  auto fail = [&](const std::string& msg) {
    cli::Error("fsbench", (mpi.active ? "rank " + std::to_string(mpi.rank) + ": " : "") + msg);
    MpiAllOk(mpi, false);
    MpiStop(mpi);
    return cli::kExitFailure;
  };

  std::optional<double> baseline;
  if (!o.baseline.empty()) {
    std::string err;
    baseline = ReadBaseline(o.baseline, &err);
    if (!baseline) return fail("--baseline: " + err);
  }
  auto w = o.files_from.empty() ? WalkTree(o.path) : LoadList(o.path, o.files_from);
  if (!w.ok()) return fail(w.status().message());
  if (o.drop_caches) {
    if (Status s = DropCaches(); !s.ok()) return fail(s.message());
  }
  if (o.warmup && Warmup(*w, o.threads * o.processes, o) != 0)
    return fail("--warmup: some files could not be read (run without --warmup to see which)");
  if (!MpiAllOk(mpi, true)) {
    MpiStop(mpi);
    return cli::kExitFailure;
  }

  const bool split = mpi.active && !o.no_split;
  MpiBarrier(mpi);
  const RunResult mine = Run(o, *w, split ? mpi.rank : 0, split ? mpi.size : 1);
  const std::vector<std::string> all = MpiGather(mpi, mine.Serialize());
  int rc = cli::kExitOk;
  if (mpi.rank == 0) {
    Report rep;
    rep.options = o;
    rep.files_listed = w->files.size();
    rep.dirs_listed = w->dirs.size();
    rep.bytes_listed = w->total_bytes;
    rep.ranks = mpi.size;
    rep.baseline_items_per_s = baseline;
    for (size_t r = 0; r < all.size(); ++r) {
      RunResult rr;
      if (!RunResult::Deserialize(all[r], &rr)) {
        rr.errors = 1;
        rr.error_samples.push_back("rank " + std::to_string(r) + ": result lost");
      }
      if (mpi.active)
        rep.per_rank.push_back({static_cast<int>(r), rr.items, rr.bytes, rr.errors, rr.seconds});
      rep.total.Merge(rr);
    }
    std::fputs(o.json ? rep.Json().c_str() : rep.Table().c_str(), stdout);
    if (rep.total.errors) {
      cli::Error("fsbench", std::to_string(rep.total.errors) + " operations failed");
      rc = cli::kExitFailure;
    }
  }
  // Every rank exits with the job's status.
  const bool ok = MpiAllOk(mpi, rc == cli::kExitOk && mine.errors == 0);
  MpiStop(mpi);
  return ok ? cli::kExitOk : cli::kExitFailure;
}
