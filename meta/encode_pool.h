// The worker threads of the archive packer: CRC32C and deflate of whole members for
// every group's reader at once.
// Thread-safety: Submit and Take may be called from any thread; a job is taken by the
// thread that submitted it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "meta/pack_parts.h"

namespace fanstore::meta::archive_pack {

// Checksums and compresses whole members on worker threads, for every reader at once;
// each reader takes its results back in the order it handed them over, so the output does
// not depend on the thread count.
class EncodePool {
 public:
  EncodePool(unsigned threads, const CompressMode& mode) : policy_(mode) {
    for (unsigned t = 0; t < threads; ++t) workers_.emplace_back([this] { Work(); });
  }
  ~EncodePool() {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    work_cv_.notify_all();
    for (std::thread& t : workers_) t.join();
  }
  struct Job {
    std::vector<uint8_t> raw;
    pack_parts::Encoded out;
    bool done = false;
  };
  // Hands a whole member to a worker. The caller owns the job and must Take it (which
  // waits for the worker) before letting it go.
  std::unique_ptr<Job> Submit(std::vector<uint8_t> raw) {
    auto job = std::make_unique<Job>();
    job->raw = std::move(raw);
    std::lock_guard lk(mu_);
    todo_.push_back(job.get());
    work_cv_.notify_one();
    return job;
  }
  pack_parts::Encoded Take(Job& job) {
    std::unique_lock lk(mu_);
    done_cv_.wait(lk, [&] { return job.done; });
    return std::move(job.out);
  }

 private:
  void Work() {
    compress::Deflater d(policy_.level());
    for (;;) {
      Job* job;
      {
        std::unique_lock lk(mu_);
        work_cv_.wait(lk, [&] { return stop_ || !todo_.empty(); });
        if (stop_) return;
        job = todo_.front();
        todo_.pop_front();
      }
      pack_parts::Encoded e = pack_parts::EncodeBytes(std::move(job->raw), policy_, d);
      std::lock_guard lk(mu_);
      job->out = std::move(e);
      job->done = true;
      done_cv_.notify_all();
    }
  }
  pack_parts::Policy policy_;
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<Job*> todo_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace fanstore::meta::archive_pack
