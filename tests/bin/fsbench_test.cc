#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>

#include "bin/fsbench/latency_histogram.h"
#include "bin/fsbench/options.h"
#include "bin/fsbench/read_buffer.h"
#include "bin/fsbench/report.h"
#include "bin/fsbench/runner.h"
#include "bin/fsbench/workload.h"
#include "tests/testutil.h"

namespace fanstore::fsbench {
namespace {

ParseOutcome Parse(std::vector<const char*> args) {
  args.insert(args.begin(), "fsbench");
  return ParseOptions(static_cast<int>(args.size()), args.data());
}

TEST(ParseOptions, DefaultsAreTheDataLoaderPattern) {
  const ParseOutcome p = Parse({"/data"});
  ASSERT_TRUE(p.run);
  EXPECT_EQ(p.options.path, "/data");
  EXPECT_EQ(p.options.op, Op::kRead);
  EXPECT_EQ(p.options.pattern, Pattern::kRandom);
  EXPECT_EQ(p.options.epochs, 1u);
  EXPECT_EQ(p.options.threads, 1u);
  EXPECT_EQ(p.options.buffer_offset, 0u);  // on a page, as cat's buffer
}

TEST(ReadBuffer, StartsTheGivenBytesPastAPageAndHoldsTheReadSize) {
  for (const uint64_t off : {0u, 16u, 4095u}) {
    ReadBuffer b(300000, off);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 4096, off);
    EXPECT_EQ(b.size(), 300000u);
    b.data()[0] = 'a';
    b.data()[b.size() - 1] = 'z';  // (ASan: the whole of it is the buffer's)
  }
}

TEST(ParseOptions, ReadsEveryOption) {
  const ParseOutcome p = Parse({"/d",
                                "--op",
                                "read-range",
                                "--pattern",
                                "sequential",
                                "--epochs",
                                "3",
                                "-t",
                                "4",
                                "-p",
                                "2",
                                "--duration",
                                "1.5",
                                "--files",
                                "99",
                                "--warmup",
                                "--seed",
                                "7",
                                "--read-size",
                                "4096",
                                "--json",
                                "--no-split",
                                "--files-from",
                                "list.txt",
                                "--latency-every",
                                "8",
                                "--buffer-offset",
                                "16"});
  ASSERT_TRUE(p.run);
  const Options& o = p.options;
  EXPECT_EQ(o.op, Op::kReadRange);
  EXPECT_EQ(o.pattern, Pattern::kSequential);
  EXPECT_EQ(o.epochs, 3u);
  EXPECT_EQ(o.threads, 4u);
  EXPECT_EQ(o.processes, 2u);
  EXPECT_DOUBLE_EQ(o.duration, 1.5);
  EXPECT_EQ(o.max_files, 99u);
  EXPECT_TRUE(o.warmup && o.json && o.no_split);
  EXPECT_EQ(o.seed, 7u);
  EXPECT_EQ(o.read_size, 4096u);
  EXPECT_EQ(o.files_from, "list.txt");
  EXPECT_EQ(o.latency_every, 8u);
  EXPECT_EQ(o.buffer_offset, 16u);
}

TEST(ParseOptions, BadUsageExitsWithTwo) {
  EXPECT_EQ(Parse({}).exit_code, 2);
  EXPECT_EQ(Parse({"/d", "--op", "write"}).exit_code, 2);
  EXPECT_EQ(Parse({"/d", "--pattern", "zigzag"}).exit_code, 2);
  EXPECT_EQ(Parse({"/d", "--threads", "0"}).exit_code, 2);
  EXPECT_EQ(Parse({"/d", "--buffer-offset", "4096"}).exit_code, 2);
  EXPECT_FALSE(Parse({"/d", "--bogus"}).run);
}

TEST(EpochOrder, IsAPermutationThatChangesEachEpoch) {
  for (size_t n : {size_t{1}, size_t{2}, size_t{17}, size_t{10000}}) {
    const auto a = EpochOrder(n, Pattern::kRandom, 42, 0);
    auto sorted = a;
    std::sort(sorted.begin(), sorted.end());
    std::vector<uint32_t> ident(n);
    std::iota(ident.begin(), ident.end(), 0u);
    EXPECT_EQ(sorted, ident) << n;
    if (n > 2) {
      EXPECT_NE(a, EpochOrder(n, Pattern::kRandom, 42, 1)) << n;
      EXPECT_NE(a, ident) << n;
    }
    EXPECT_EQ(a, EpochOrder(n, Pattern::kRandom, 42, 0)) << "deterministic";
  }
  EXPECT_EQ(EpochOrder(5, Pattern::kSequential, 42, 3), (std::vector<uint32_t>{0, 1, 2, 3, 4}));
}

TEST(ShareOf, RanksPartitionTheEpochExactly) {
  const auto order = EpochOrder(1001, Pattern::kRandom, 3, 0);
  std::multiset<uint32_t> all;
  for (int r = 0; r < 4; ++r) {
    const auto s = ShareOf(order, r, 4);
    EXPECT_GE(s.size(), 250u);
    EXPECT_LE(s.size(), 251u);
    all.insert(s.begin(), s.end());
  }
  EXPECT_EQ(all, std::multiset<uint32_t>(order.begin(), order.end()));
}

TEST(LatencyHistogram, SmallValuesAreExact) {
  LatencyHistogram h;
  for (uint64_t v = 1; v <= 100; ++v) h.Record(v);
  EXPECT_EQ(h.Percentile(50), 50u);
  EXPECT_EQ(h.Percentile(90), 90u);
  EXPECT_EQ(h.Percentile(99), 99u);
  EXPECT_EQ(h.Percentile(100), 100u);
  EXPECT_EQ(h.max(), 100u);
}

TEST(LatencyHistogram, PercentilesWithinOnePercent) {
  std::mt19937_64 rng(5);
  std::lognormal_distribution<double> dist(std::log(20000.0), 1.0);
  std::vector<uint64_t> v;
  LatencyHistogram h;
  for (int i = 0; i < 100000; ++i) {
    const auto x = static_cast<uint64_t>(dist(rng));
    v.push_back(x);
    h.Record(x);
  }
  std::sort(v.begin(), v.end());
  for (double p : {50.0, 90.0, 99.0, 99.9}) {
    const uint64_t exact = v[static_cast<size_t>(std::ceil(p / 100 * v.size())) - 1];
    EXPECT_NEAR(static_cast<double>(h.Percentile(p)), static_cast<double>(exact), exact * 0.01)
        << p;
  }
  EXPECT_EQ(h.max(), v.back());
}

TEST(LatencyHistogram, BucketsCoverEveryValueOnce) {
  for (uint64_t v : {uint64_t{0}, uint64_t{127}, uint64_t{128}, uint64_t{129}, uint64_t{1} << 20,
                     (uint64_t{1} << 40) + 12345, UINT64_MAX}) {
    const int b = LatencyHistogram::BucketOf(v);
    ASSERT_LT(b, LatencyHistogram::kBuckets);
    EXPECT_LE(LatencyHistogram::BucketLow(b), v);
    EXPECT_GE(LatencyHistogram::BucketHigh(b), v);
  }
}

TEST(LatencyHistogram, MergeEqualsRecordingEverything) {
  LatencyHistogram a, b, all;
  for (uint64_t i = 1; i < 5000; i += 3) {
    (i % 2 ? a : b).Record(i * 37);
    all.Record(i * 37);
  }
  a.Merge(b);
  EXPECT_EQ(a.count(), all.count());
  EXPECT_EQ(a.buckets(), all.buckets());
  EXPECT_EQ(a.Percentile(99), all.Percentile(99));
}

TEST(Runner, VisitsEveryFileOncePerEpochAcrossThreadsAndProcesses) {
  testing::TempDir t;
  uint64_t bytes = 0;
  for (int i = 0; i < 123; ++i) {
    testing::WriteFile(t / ("d" + std::to_string(i % 5) + "/f" + std::to_string(i)),
                       std::string(100 + i, 'x'));
    bytes += 100 + i;
  }
  auto w = WalkTree(t.path());
  ASSERT_TRUE(w.ok());
  ASSERT_EQ(w->files.size(), 123u);
  Options o;
  o.op = Op::kRead;
  o.epochs = 3;
  o.threads = 3;
  o.processes = 2;
  const RunResult r = fsbench::Run(o, *w, 0, 1);
  EXPECT_EQ(r.errors, 0u);
  EXPECT_EQ(r.items, 3u * 123);
  EXPECT_EQ(r.bytes, 3 * bytes);
  EXPECT_EQ(r.ops[OpIndex(Op::kRead)].latency.count(), 3u * 123);
}

// Enough items that workers claim them in batches (here 4000 / (4 workers * 64) = 15): each
// file is still read once per epoch, and --latency-every times one operation in N.
TEST(Runner, BatchedClaimsVisitEveryFileAndTimeOneOpInN) {
  testing::TempDir t;
  uint64_t bytes = 0;
  for (int i = 0; i < 2000; ++i) {
    testing::WriteFile(t / ("d" + std::to_string(i % 7) + "/f" + std::to_string(i)),
                       std::string(1 + i % 97 + i / 97 * 100, 'x'));  // sizes tell files apart
    bytes += 1 + i % 97 + i / 97 * 100;
  }
  auto w = WalkTree(t.path());
  ASSERT_TRUE(w.ok());
  Options o;
  o.op = Op::kRead;
  o.epochs = 2;
  o.threads = 2;
  o.processes = 2;
  o.latency_every = 7;
  const RunResult r = fsbench::Run(o, *w, 0, 1);
  EXPECT_EQ(r.errors, 0u);
  EXPECT_EQ(r.items, 4000u);
  EXPECT_EQ(r.bytes, 2 * bytes);
  EXPECT_EQ(r.ops[OpIndex(Op::kRead)].ops, 4000u);
  // Each of the 4 workers times its 1st, 8th, 15th... operation.
  const uint64_t timed = r.ops[OpIndex(Op::kRead)].latency.count();
  EXPECT_GE(timed, 4000u / 7);
  EXPECT_LE(timed, 4000u / 7 + 4);
}

// --fresh-processes: each epoch by new processes, every file once per epoch; --files
// stops inside an epoch.
TEST(Runner, FreshProcessesReadEveryFileOncePerEpoch) {
  testing::TempDir t;
  uint64_t bytes = 0;
  for (int i = 0; i < 300; ++i) {
    testing::WriteFile(t / ("d" + std::to_string(i % 5) + "/f" + std::to_string(i)),
                       std::string(10 + i, 'y'));
    bytes += 10 + i;
  }
  auto w = WalkTree(t.path());
  ASSERT_TRUE(w.ok());
  Options o;
  o.op = Op::kRead;
  o.epochs = 3;
  o.threads = 2;
  o.processes = 2;
  o.fresh_processes = true;
  RunResult r = fsbench::Run(o, *w, 0, 1);
  EXPECT_EQ(r.errors, 0u);
  EXPECT_EQ(r.items, 900u);
  EXPECT_EQ(r.bytes, 3 * bytes);
  o.max_files = 450;
  r = fsbench::Run(o, *w, 0, 1);
  EXPECT_EQ(r.errors, 0u);
  EXPECT_EQ(r.items, 450u);
}

TEST(Runner, MissingFilesAreCountedAsErrors) {
  testing::TempDir t;
  for (int i = 0; i < 10; ++i) testing::WriteFile(t / ("f" + std::to_string(i)), "abc");
  auto w = WalkTree(t.path());
  ASSERT_TRUE(w.ok());
  std::filesystem::remove(t / "f3");
  std::filesystem::remove(t / "f7");
  Options o;
  o.op = Op::kStat;
  const RunResult r = fsbench::Run(o, *w, 0, 1);
  EXPECT_EQ(r.errors, 2u);
  EXPECT_EQ(r.ops[OpIndex(Op::kStat)].ops, 8u);
  ASSERT_FALSE(r.error_samples.empty());
  EXPECT_NE(r.error_samples[0].find("No such file or directory"), std::string::npos);
}

TEST(RunResult, SerializationRoundTrips) {
  RunResult r;
  r.items = 5;
  r.bytes = 77;
  r.errors = 1;
  r.seconds = 1.25;
  r.ops[2].latency.Record(1234);
  r.error_samples = {"a: b", "c"};
  RunResult back;
  ASSERT_TRUE(RunResult::Deserialize(r.Serialize(), &back));
  EXPECT_EQ(back.items, 5u);
  EXPECT_EQ(back.bytes, 77u);
  EXPECT_EQ(back.ops[2].latency.count(), 1u);
  EXPECT_EQ(back.error_samples, r.error_samples);
  EXPECT_FALSE(RunResult::Deserialize("short", &back));
}

TEST(Report, JsonEchoesTheConfigurationAndResults) {
  Report rep;
  rep.options.path = "/data \"x\"";
  rep.options.op = Op::kMixed;
  rep.files_listed = 10;
  rep.total.items = 10;
  rep.total.seconds = 2;
  rep.total.ops[OpIndex(Op::kStat)].ops = 10;
  rep.total.ops[OpIndex(Op::kStat)].latency.Record(1000);
  const std::string j = rep.Json();
  for (const char* key : {"\"tool\": \"fsbench\"", "\"config\": {", "\"op\": \"mixed\"",
                          "\"path\": \"/data \\\"x\\\"\"", "\"items_per_s\": 5",
                          "\"latency_ns\": {", "\"p99\": 1000", "\"files_listed\": 10"})
    EXPECT_NE(j.find(key), std::string::npos) << key << " in " << j;
}

}  // namespace
}  // namespace fanstore::fsbench
