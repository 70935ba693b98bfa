#include "bin/fsbench/runner.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "bin/fsbench/read_buffer.h"

namespace fanstore::fsbench {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t NowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
          .count());
}

// State shared by every worker of every process (MAP_SHARED, survives fork).
struct Shared {
  std::atomic<uint64_t> next;  // next item index to claim
  uint64_t end;                // 0, or the item to stop before (--fresh-processes: the epoch's end)
  std::atomic<uint32_t> go;    // start barrier
  std::atomic<uint32_t> stop;  // duration elapsed
};

constexpr size_t kMaxErrorSamples = 5;

class Worker {
 public:
  Worker(const Options& o, const Workload& w, int rank, int nranks, Shared* shared)
      : o_(o),
        w_(w),
        rank_(rank),
        nranks_(nranks),
        shared_(shared),
        n_items_(o.op == Op::kReaddir ? w.dirs.size() : w.files.size()),
        buf_(o.read_size, o.buffer_offset) {
    // Items are claimed from the shared counter in batches: one atomic add per item on a
    // line every worker writes cost ~50-100 ns with 2 threads, the time of a whole stat
    // served from memory. Small runs take batches small enough to stay shared out evenly.
    const uint64_t workers = uint64_t{o.threads} * o.processes;
    batch_ = std::clamp<uint64_t>(limit() / (workers * 64), 1, 64);
  }

  // Items per epoch for this rank.
  uint64_t per_epoch() const {
    return nranks_ == 1 ? n_items_ : (n_items_ + nranks_ - 1 - rank_) / nranks_;
  }
  uint64_t limit() const {
    uint64_t lim = o_.duration > 0 ? UINT64_MAX : per_epoch() * o_.epochs;
    if (o_.max_files) lim = std::min(lim, o_.max_files);
    if (shared_->end) lim = std::min(lim, shared_->end);
    return lim;
  }

  void Loop(RunResult& r, uint64_t deadline_ns) {
    const uint64_t lim = limit();
    const uint64_t per = per_epoch();
    if (per == 0) return;
    last_ns_ = NowNs();
    for (uint64_t done = 0;; ++done) {
      if (shared_->stop.load(std::memory_order_relaxed)) return;
      if (claimed_ == claim_end_) {
        claimed_ = shared_->next.fetch_add(batch_, std::memory_order_relaxed);
        claim_end_ = claimed_ + batch_;
      }
      const uint64_t k = claimed_++;
      if (k >= lim) return;
      // The clock as the last timed operation read it (no read of its own per item), and
      // read here every 64 items when few are timed.
      if (deadline_ns && o_.latency_every > 1 && done % 64 == 0) last_ns_ = NowNs();
      if (deadline_ns && last_ns_ >= deadline_ns) {
        shared_->stop.store(1, std::memory_order_relaxed);
        return;
      }
      timed_ = done % o_.latency_every == 0;
      const uint64_t epoch = k / per;
      if (epoch != cached_epoch_) {
        std::vector<uint32_t> order = EpochOrder(n_items_, o_.pattern, o_.seed, epoch);
        order_ = nranks_ == 1 ? std::move(order) : ShareOf(order, rank_, nranks_);
        cached_epoch_ = epoch;
      }
      DoItem(order_[k % per], k, r);
    }
  }

 private:
  // The clock around an operation, read only when it is timed (one in --latency-every).
  uint64_t Start() const { return timed_ ? NowNs() : 0; }
  uint64_t End() {
    if (timed_) last_ns_ = NowNs();
    return last_ns_;
  }
  void Record(OpStats& s, uint64_t t0, uint64_t t1) {
    if (timed_) s.latency.Record(t1 - t0);
  }

  void Fail(RunResult& r, OpStats& s, const std::string& path, int err,
            const char* what = nullptr) {
    End();  // (a run of failures still reaches its deadline)
    ++s.errors;
    ++r.errors;
    if (r.error_samples.size() < kMaxErrorSamples)
      r.error_samples.push_back(path + ": " + (what ? what : std::strerror(err)));
  }

  void DoItem(uint32_t i, uint64_t k, RunResult& r) {
    switch (o_.op) {
      case Op::kStat:
        Stat(w_.files[i], r);
        break;
      case Op::kOpenClose:
        OpenClose(w_.files[i], r);
        break;
      case Op::kRead:
        Read(i, r);
        break;
      case Op::kReadRange:
        ReadRange(i, k, r);
        break;
      case Op::kReaddir:
        Readdir(w_.dirs[i], r);
        break;
      case Op::kMixed:
        Stat(w_.files[i], r);
        Read(i, r);
        break;
    }
    ++r.items;
  }

  void Stat(const char* p, RunResult& r) {
    OpStats& s = r.ops[OpIndex(Op::kStat)];
    struct stat st;
    const uint64_t t0 = Start();
    const int rc = ::stat(p, &st);
    const uint64_t t1 = End();
    if (rc != 0) return Fail(r, s, p, errno);
    ++s.ops;
    Record(s, t0, t1);
  }

  void OpenClose(const char* p, RunResult& r) {
    OpStats& s = r.ops[OpIndex(Op::kOpenClose)];
    const uint64_t t0 = Start();
    const int fd = ::open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Fail(r, s, p, errno);
    ::close(fd);
    Record(s, t0, End());
    ++s.ops;
  }

  void Read(uint32_t i, RunResult& r) {
    OpStats& s = r.ops[OpIndex(Op::kRead)];
    const char* p = w_.files[i];
    const uint64_t t0 = Start();
    const int fd = ::open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Fail(r, s, p, errno);
    uint64_t got = 0;
    for (;;) {
      const ssize_t n = ::read(fd, buf_.data(), buf_.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        const int e = errno;
        ::close(fd);
        return Fail(r, s, p, e);
      }
      if (n == 0) break;
      got += static_cast<uint64_t>(n);
    }
    ::close(fd);
    const uint64_t t1 = End();
    if (got != w_.sizes[i]) return Fail(r, s, p, 0, "read a different size than listed");
    Record(s, t0, t1);
    ++s.ops;
    s.bytes += got;
    r.bytes += got;
  }

  void ReadRange(uint32_t i, uint64_t k, RunResult& r) {
    OpStats& s = r.ops[OpIndex(Op::kReadRange)];
    const char* p = w_.files[i];
    const uint64_t size = w_.sizes[i];
    std::mt19937_64 rng(o_.seed ^ (k * 0xD1B54A32D192ED03ull));
    const uint64_t off = size ? rng() % size : 0;
    const uint64_t len = std::min<uint64_t>(1 + rng() % o_.read_size, size - off);
    const uint64_t t0 = Start();
    const int fd = ::open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Fail(r, s, p, errno);
    ssize_t n;
    do {
      n = ::pread(fd, buf_.data(), static_cast<size_t>(len), static_cast<off_t>(off));
    } while (n < 0 && errno == EINTR);
    const int e = errno;
    ::close(fd);
    const uint64_t t1 = End();
    if (n < 0) return Fail(r, s, p, e);
    if (static_cast<uint64_t>(n) != len) return Fail(r, s, p, 0, "short pread");
    Record(s, t0, t1);
    ++s.ops;
    s.bytes += len;
    r.bytes += len;
  }

  void Readdir(const std::string& p, RunResult& r) {
    OpStats& s = r.ops[OpIndex(Op::kReaddir)];
    const uint64_t t0 = Start();
    DIR* d = ::opendir(p.c_str());
    if (!d) return Fail(r, s, p, errno);
    uint64_t entries = 0;
    errno = 0;
    while (::readdir(d)) ++entries;
    const int e = errno;
    ::closedir(d);
    const uint64_t t1 = End();
    if (e != 0) return Fail(r, s, p, e);
    Record(s, t0, t1);
    ++s.ops;
    s.bytes += entries;  // entries listed, reported as such for readdir
  }

  const Options& o_;
  const Workload& w_;
  int rank_, nranks_;
  Shared* shared_;
  size_t n_items_;
  ReadBuffer buf_;
  std::vector<uint32_t> order_;
  uint64_t cached_epoch_ = UINT64_MAX;
  uint64_t batch_ = 1, claimed_ = 0, claim_end_ = 0;  // items claimed, not yet taken
  bool timed_ = true;
  uint64_t last_ns_ = 0;  // the clock's last reading
};

// Runs `threads` workers in this process and merges their results.
RunResult RunThreads(const Options& o, const Workload& w, int rank, int nranks, Shared* shared,
                     uint64_t deadline_ns) {
  std::vector<RunResult> parts(o.threads);
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < o.threads; ++t) {
    ts.emplace_back([&, t] {
      Worker wk(o, w, rank, nranks, shared);
      // Counted on this thread's own stack, handed over at the end: results side by side in
      // `parts` share a cache line where one ends and the next begins, and a counter bumped
      // per item there costs every thread a miss (2-thread stat rates moved 25% with the
      // heap's layout).
      RunResult mine;
      while (!shared->go.load(std::memory_order_acquire)) std::this_thread::yield();
      wk.Loop(mine, deadline_ns);
      parts[t] = std::move(mine);
    });
  }
  for (auto& t : ts) t.join();
  RunResult all;
  for (const RunResult& p : parts) all.Merge(p);
  return all;
}

bool WriteAllFd(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

std::string ReadAllFd(int fd) {
  std::string s;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return s;
    s.append(buf, static_cast<size_t>(n));
  }
}

}  // namespace

int OpIndex(Op op) {
  for (int i = 0; i < kNumOps; ++i)
    if (kMeasuredOps[i] == op) return i;
  return 0;
}

void OpStats::Merge(const OpStats& o) {
  ops += o.ops;
  bytes += o.bytes;
  errors += o.errors;
  latency.Merge(o.latency);
}

void RunResult::Merge(const RunResult& o) {
  for (int i = 0; i < kNumOps; ++i) ops[i].Merge(o.ops[i]);
  items += o.items;
  bytes += o.bytes;
  errors += o.errors;
  seconds = std::max(seconds, o.seconds);
  for (const auto& e : o.error_samples)
    if (error_samples.size() < kMaxErrorSamples) error_samples.push_back(e);
}

// Same binary on both ends (forked child or MPI rank of the same build): raw layout.
std::string RunResult::Serialize() const {
  std::string s;
  auto put = [&](const void* p, size_t n) { s.append(static_cast<const char*>(p), n); };
  put(&ops, sizeof ops);
  put(&items, sizeof items);
  put(&bytes, sizeof bytes);
  put(&errors, sizeof errors);
  put(&seconds, sizeof seconds);
  for (const auto& e : error_samples) {
    const uint32_t n = static_cast<uint32_t>(e.size());
    put(&n, sizeof n);
    put(e.data(), n);
  }
  return s;
}

bool RunResult::Deserialize(const std::string& s, RunResult* r) {
  size_t off = 0;
  auto get = [&](void* p, size_t n) {
    if (s.size() - off < n) return false;
    std::memcpy(p, s.data() + off, n);
    off += n;
    return true;
  };
  static_assert(std::is_trivially_copyable_v<OpStats>);
  if (!get(&r->ops, sizeof r->ops) || !get(&r->items, sizeof r->items) ||
      !get(&r->bytes, sizeof r->bytes) || !get(&r->errors, sizeof r->errors) ||
      !get(&r->seconds, sizeof r->seconds))
    return false;
  while (off < s.size()) {
    uint32_t n = 0;
    if (!get(&n, sizeof n) || s.size() - off < n) return false;
    r->error_samples.emplace_back(s.data() + off, n);
    off += n;
  }
  return true;
}

namespace {

// A forked worker process: its pid and the read end of the pipe its result comes through.
struct Child {
  pid_t pid;
  int fd;
};

// Forks a process that runs `work` and sends its result back; nullopt when it cannot.
template <typename Work>
std::optional<Child> ForkWorker(Work work) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return std::nullopt;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    const RunResult r = work();
    _exit(WriteAllFd(fds[1], r.Serialize()) ? 0 : 1);
  }
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    return std::nullopt;
  }
  return Child{pid, fds[0]};
}

// Waits for a worker and merges its result into *all (a failed one counts as an error).
void Collect(const Child& c, RunResult* all) {
  const std::string data = ReadAllFd(c.fd);
  ::close(c.fd);
  int status = 0;
  ::waitpid(c.pid, &status, 0);
  RunResult child;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !RunResult::Deserialize(data, &child)) {
    ++all->errors;
    all->error_samples.push_back("worker process " + std::to_string(c.pid) + " failed");
    return;
  }
  all->Merge(child);
}

void ForkFailed(RunResult* all) {
  ++all->errors;
  all->error_samples.push_back("could not fork every worker process");
}

// --fresh-processes: each epoch, `processes` new processes read it (the parent forks and
// waits); one result over all epochs, timed from the first fork to the last exit.
RunResult RunFresh(const Options& o, const Workload& w, int rank, int nranks, Shared* shared) {
  RunResult all;
  const uint64_t items = o.op == Op::kReaddir ? w.dirs.size() : w.files.size();
  const uint64_t per = nranks == 1 ? items : (items + nranks - 1 - rank) / nranks;
  const uint64_t last =
      o.max_files ? std::min<uint64_t>(o.max_files, per * o.epochs) : per * o.epochs;
  const uint64_t t0 = NowNs();
  for (uint64_t e = 0; e < o.epochs && e * per < last; ++e) {
    shared->next.store(e * per, std::memory_order_relaxed);
    shared->end = std::min(last, (e + 1) * per);
    shared->go.store(1, std::memory_order_release);
    std::vector<Child> kids;
    for (unsigned p = 0; p < o.processes; ++p) {
      auto c = ForkWorker([&] { return RunThreads(o, w, rank, nranks, shared, 0); });
      if (!c) break;
      kids.push_back(*c);
    }
    if (kids.size() != o.processes) ForkFailed(&all);
    for (const Child& c : kids) Collect(c, &all);
  }
  all.seconds = static_cast<double>(NowNs() - t0) / 1e9;
  return all;
}

}  // namespace

RunResult Run(const Options& o, const Workload& w, int rank, int nranks) {
  void* mem =
      ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    RunResult r;
    r.errors = 1;
    r.error_samples.push_back(std::string("mmap: ") + std::strerror(errno));
    return r;
  }
  auto* shared = new (mem) Shared{};
  if (o.fresh_processes) {
    RunResult all = RunFresh(o, w, rank, nranks, shared);
    ::munmap(mem, sizeof(Shared));
    return all;
  }

  // Processes beyond the first are forked; the calling process is worker process 0.
  std::vector<Child> kids;
  for (unsigned p = 1; p < o.processes; ++p) {
    auto c = ForkWorker([&] {
      while (!shared->go.load(std::memory_order_acquire)) std::this_thread::yield();
      const uint64_t deadline =
          o.duration > 0 ? NowNs() + static_cast<uint64_t>(o.duration * 1e9) : 0;
      return RunThreads(o, w, rank, nranks, shared, deadline);
    });
    if (!c) break;
    kids.push_back(*c);
  }

  const uint64_t t0 = NowNs();
  const uint64_t deadline = o.duration > 0 ? t0 + static_cast<uint64_t>(o.duration * 1e9) : 0;
  shared->go.store(1, std::memory_order_release);
  RunResult all = RunThreads(o, w, rank, nranks, shared, deadline);
  for (const Child& c : kids) Collect(c, &all);
  all.seconds = static_cast<double>(NowNs() - t0) / 1e9;
  if (o.processes > 1 && kids.size() + 1 != o.processes) ForkFailed(&all);
  ::munmap(mem, sizeof(Shared));
  return all;
}

uint64_t Warmup(const Workload& w, unsigned threads, const Options& o) {
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> errors{0};
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < threads; ++t) {
    ts.emplace_back([&] {
      ReadBuffer buf(o.read_size, o.buffer_offset);
      for (size_t i; (i = next.fetch_add(1)) < w.files.size();) {
        const int fd = ::open(w.files[i], O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
          ++errors;
          continue;
        }
        while (::read(fd, buf.data(), buf.size()) > 0) {
        }
        ::close(fd);
      }
    });
  }
  for (auto& t : ts) t.join();
  return errors.load();
}

}  // namespace fanstore::fsbench
