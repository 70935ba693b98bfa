#include "bin/fsbench/report.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "bin/cli_util.h"

namespace fanstore::fsbench {
namespace {

std::string Fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

std::string Dur(uint64_t ns) {
  if (ns < 10000) return Fmt("%.0fns", static_cast<double>(ns));
  if (ns < 10000000) return Fmt("%.1fus", ns / 1e3);
  if (ns < 10000000000ull) return Fmt("%.1fms", ns / 1e6);
  return Fmt("%.1fs", ns / 1e9);
}

}  // namespace

double Report::items_per_s() const {
  if (per_rank.empty()) return total.seconds > 0 ? total.items / total.seconds : 0;
  double sum = 0;
  for (const auto& r : per_rank) sum += r.items_per_s();
  return sum;
}

std::string Report::Table() const {
  std::ostringstream o;
  const Options& c = options;
  o << "fsbench " << c.path << ": op=" << OpName(c.op) << " pattern=" << PatternName(c.pattern)
    << " epochs=" << (c.duration > 0 ? std::string("-") : std::to_string(c.epochs))
    << " threads=" << c.threads << " processes=" << c.processes
    << (c.fresh_processes ? " (new each epoch)" : "");
  if (ranks > 1) o << " ranks=" << ranks;
  if (c.latency_every > 1) o << " (latency: 1 op in " << c.latency_every << " timed)";
  o << "\n  " << files_listed << " files (" << cli::HumanBytes(bytes_listed) << "), " << dirs_listed
    << " dirs; " << Fmt("%.3f", total.seconds) << " s measured\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-11s %10s %12s %10s %9s %9s %9s %9s %7s\n", "op", "count",
                "ops/s", "MB/s", "p50", "p90", "p99", "max", "errors");
  o << line;
  for (int i = 0; i < kNumOps; ++i) {
    const OpStats& s = total.ops[i];
    if (s.ops == 0 && s.errors == 0) continue;
    const double secs = total.seconds > 0 ? total.seconds : 1;
    const bool bytes = kMeasuredOps[i] == Op::kRead || kMeasuredOps[i] == Op::kReadRange;
    std::snprintf(line, sizeof line, "%-11s %10llu %12.1f %10s %9s %9s %9s %9s %7llu\n",
                  OpName(kMeasuredOps[i]), static_cast<unsigned long long>(s.ops), s.ops / secs,
                  bytes ? Fmt("%.1f", s.bytes / secs / 1e6).c_str() : "-",
                  Dur(s.latency.Percentile(50)).c_str(), Dur(s.latency.Percentile(90)).c_str(),
                  Dur(s.latency.Percentile(99)).c_str(), Dur(s.latency.max()).c_str(),
                  static_cast<unsigned long long>(s.errors));
    o << line;
  }
  if (!per_rank.empty()) {
    o << "rank        items      items/s    errors\n";
    double lo = 1e300, hi = 0;
    for (const auto& r : per_rank) {
      std::snprintf(line, sizeof line, "%-6d %10llu %12.1f %9llu\n", r.rank,
                    static_cast<unsigned long long>(r.items), r.items_per_s(),
                    static_cast<unsigned long long>(r.errors));
      o << line;
      lo = std::min(lo, r.items_per_s());
      hi = std::max(hi, r.items_per_s());
    }
    o << "aggregate: " << Fmt("%.1f", items_per_s()) << " items/s (sum over ranks), min rank "
      << Fmt("%.1f", lo) << ", max rank " << Fmt("%.1f", hi);
    if (baseline_items_per_s && *baseline_items_per_s > 0)
      o << ", efficiency " << Fmt("%.1f%%", 100 * items_per_s() / (ranks * *baseline_items_per_s))
        << " vs " << ranks << " x the baseline";
    o << "\n";
  }
  for (const auto& e : total.error_samples) o << "error: " << e << "\n";
  if (total.errors > total.error_samples.size())
    o << "error: ... " << total.errors - total.error_samples.size() << " more\n";
  return o.str();
}

std::string Report::Json() const {
  std::ostringstream o;
  const Options& c = options;
  o << "{\"tool\": \"fsbench\", \"version\": \"" << FANSTORE_VERSION << "\", \"config\": {"
    << "\"path\": " << cli::JsonString(c.path) << ", \"op\": \"" << OpName(c.op)
    << "\", \"pattern\": \"" << PatternName(c.pattern) << "\", \"epochs\": " << c.epochs
    << ", \"files_from\": " << cli::JsonString(c.files_from) << ", \"threads\": " << c.threads
    << ", \"processes\": " << c.processes
    << ", \"fresh_processes\": " << (c.fresh_processes ? "true" : "false")
    << ", \"duration\": " << c.duration << ", \"max_files\": " << c.max_files
    << ", \"warmup\": " << (c.warmup ? "true" : "false") << ", \"seed\": " << c.seed
    << ", \"read_size\": " << c.read_size << ", \"buffer_offset\": " << c.buffer_offset
    << ", \"latency_every\": " << c.latency_every
    << ", \"drop_caches\": " << (c.drop_caches ? "true" : "false")
    << ", \"split\": " << (c.no_split ? "false" : "true") << ", \"ranks\": " << ranks
    << ", \"files_listed\": " << files_listed << ", \"dirs_listed\": " << dirs_listed
    << ", \"bytes_listed\": " << bytes_listed << "}, ";
  o << "\"seconds\": " << total.seconds << ", \"items\": " << total.items
    << ", \"bytes\": " << total.bytes << ", \"errors\": " << total.errors
    << ", \"items_per_s\": " << items_per_s()
    << ", \"mb_per_s\": " << (total.seconds > 0 ? total.bytes / total.seconds / 1e6 : 0)
    << ", \"ops\": [";
  bool first = true;
  for (int i = 0; i < kNumOps; ++i) {
    const OpStats& s = total.ops[i];
    if (s.ops == 0 && s.errors == 0) continue;
    const double secs = total.seconds > 0 ? total.seconds : 1;
    o << (first ? "" : ", ") << "{\"op\": \"" << OpName(kMeasuredOps[i])
      << "\", \"count\": " << s.ops << ", \"bytes\": " << s.bytes << ", \"errors\": " << s.errors
      << ", \"ops_per_s\": " << s.ops / secs << ", \"mb_per_s\": " << s.bytes / secs / 1e6
      << ", \"latency_ns\": {\"p50\": " << s.latency.Percentile(50)
      << ", \"p90\": " << s.latency.Percentile(90) << ", \"p99\": " << s.latency.Percentile(99)
      << ", \"max\": " << s.latency.max() << "}}";
    first = false;
  }
  o << "], \"error_samples\": [";
  for (size_t i = 0; i < total.error_samples.size(); ++i)
    o << (i ? ", " : "") << cli::JsonString(total.error_samples[i]);
  o << "]";
  if (!per_rank.empty()) {
    o << ", \"ranks\": [";
    double lo = 1e300, hi = 0;
    for (size_t i = 0; i < per_rank.size(); ++i) {
      const auto& r = per_rank[i];
      o << (i ? ", " : "") << "{\"rank\": " << r.rank << ", \"items\": " << r.items
        << ", \"bytes\": " << r.bytes << ", \"errors\": " << r.errors
        << ", \"seconds\": " << r.seconds << ", \"items_per_s\": " << r.items_per_s() << "}";
      lo = std::min(lo, r.items_per_s());
      hi = std::max(hi, r.items_per_s());
    }
    o << "], \"aggregate\": {\"items_per_s_sum\": " << items_per_s()
      << ", \"min_rank_items_per_s\": " << lo << ", \"max_rank_items_per_s\": " << hi;
    if (baseline_items_per_s && *baseline_items_per_s > 0)
      o << ", \"baseline_items_per_s\": " << *baseline_items_per_s
        << ", \"efficiency\": " << items_per_s() / (ranks * *baseline_items_per_s);
    o << "}";
  }
  o << "}\n";
  return o.str();
}

std::optional<double> ReadBaseline(const std::string& file, std::string* error) {
  std::ifstream in(file);
  if (!in) {
    *error = file + ": cannot open";
    return std::nullopt;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string s = ss.str();
  const std::string key = "\"items_per_s\": ";
  const size_t at = s.find(key);
  if (s.find("\"tool\": \"fsbench\"") == std::string::npos || at == std::string::npos) {
    *error = file + ": not an fsbench --json result";
    return std::nullopt;
  }
  return std::strtod(s.c_str() + at + key.size(), nullptr);
}

}  // namespace fanstore::fsbench
