// LatencyHistogram: a log-linear histogram of nanosecond latencies (128 sub-buckets per
// power of two: every recorded value is kept within 0.8% of itself, values below 128 ns
// exactly). Mergeable by addition, so threads, forked processes and MPI ranks can combine
// exact counts. Percentiles use the nearest-rank method.
// Thread-safety: one writer per instance; merge after the writers are done.
#pragma once

#include <array>
#include <cstdint>

namespace fanstore::fsbench {

class LatencyHistogram {
 public:
  static constexpr int kSubBits = 7;
  static constexpr int kSub = 1 << kSubBits;
  static constexpr int kBuckets = (64 - kSubBits + 1) * kSub;

  void Record(uint64_t ns);
  void Merge(const LatencyHistogram& o);
  uint64_t count() const { return count_; }
  uint64_t max() const { return max_; }
  uint64_t min() const { return count_ ? min_ : 0; }
  // The nearest-rank p-th percentile (0 < p <= 100), as the recorded bucket's midpoint
  // clamped to [min, max]; 0 when empty.
  uint64_t Percentile(double p) const;

  static int BucketOf(uint64_t ns);
  static uint64_t BucketLow(int bucket);
  static uint64_t BucketHigh(int bucket);  // inclusive

  const std::array<uint64_t, kBuckets>& buckets() const { return counts_; }

 private:
  std::array<uint64_t, kBuckets> counts_{};
  uint64_t count_ = 0;
  uint64_t max_ = 0;
  uint64_t min_ = UINT64_MAX;
};

}  // namespace fanstore::fsbench
