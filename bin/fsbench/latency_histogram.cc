#include "bin/fsbench/latency_histogram.h"

#include <algorithm>
#include <cmath>

namespace fanstore::fsbench {

int LatencyHistogram::BucketOf(uint64_t v) {
  if (v < kSub) return static_cast<int>(v);
  const int e = 63 - __builtin_clzll(v);  // >= kSubBits
  const int sub = static_cast<int>((v >> (e - kSubBits)) & (kSub - 1));
  return (e - kSubBits + 1) * kSub + sub;
}

uint64_t LatencyHistogram::BucketLow(int b) {
  if (b < kSub) return static_cast<uint64_t>(b);
  const int e = b / kSub + kSubBits - 1;
  const uint64_t sub = static_cast<uint64_t>(b % kSub);
  return (static_cast<uint64_t>(kSub) + sub) << (e - kSubBits);
}

uint64_t LatencyHistogram::BucketHigh(int b) {
  if (b < kSub) return static_cast<uint64_t>(b);
  const int e = b / kSub + kSubBits - 1;
  return BucketLow(b) + ((uint64_t{1} << (e - kSubBits)) - 1);
}

void LatencyHistogram::Record(uint64_t ns) {
  ++counts_[BucketOf(ns)];
  ++count_;
  max_ = std::max(max_, ns);
  min_ = std::min(min_, ns);
}

void LatencyHistogram::Merge(const LatencyHistogram& o) {
  for (int i = 0; i < kBuckets; ++i) counts_[i] += o.counts_[i];
  count_ += o.count_;
  max_ = std::max(max_, o.max_);
  min_ = std::min(min_, o.min_);
}

uint64_t LatencyHistogram::Percentile(double p) const {
  if (count_ == 0) return 0;
  const auto rank = static_cast<uint64_t>(std::max(1.0, std::ceil(p / 100.0 * count_)));
  uint64_t seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += counts_[b];
    if (seen >= rank) {
      const uint64_t mid = BucketLow(b) + (BucketHigh(b) - BucketLow(b)) / 2;
      return std::clamp(mid, min(), max_);
    }
  }
  return max_;
}

}  // namespace fanstore::fsbench
