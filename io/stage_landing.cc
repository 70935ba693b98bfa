#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "io/stage.h"
#include "io/stage_parts.h"

namespace fanstore::io {
namespace {

// One partition's copy: its files, its chunks issued (one bit each) and landed.
struct Part {
  const LandingCopy* copy;
  int in = -1, out = -1;
  uint64_t size = 0, chunks = 0, landed = 0, next = 0;  // next: the sequential cursor
  std::vector<uint64_t> issued;
  bool finished = false;
  bool taken = false;  // a stream reads it in order
  std::chrono::steady_clock::time_point t0;
};

class Lander {
 public:
  Lander(const std::vector<LandingCopy>& copies, const meta::Manifest& manifest, LandingMap* map,
         const LandingOptions& opt, const LandedFn& landed)
      : manifest_(manifest), map_(map), opt_(opt), landed_(landed) {
    for (const LandingCopy& c : copies) parts_.push_back(Part{&c});
  }
  ~Lander() {
    for (Part& p : parts_) {
      if (p.in >= 0) ::close(p.in);
      if (p.out >= 0) ::close(p.out);
      if (!p.finished) {
        ::unlink((p.copy->dst + ".staging").c_str());
        map_->SetState(p.copy->partition, LandingState::kFailed);
      }
    }
  }

  Status Run(const std::atomic<bool>* cancel) {
    for (Part& p : parts_) {
      bool no_room = false;
      auto size = OpenCopy(p.copy->src, p.copy->dst + ".staging", p.copy->dst, manifest_,
                           p.copy->partition, &p.in, &p.out, &no_room);
      if (!size.ok()) return size.status();
      p.size = *size;
      p.chunks = (p.size + kLandingChunk - 1) / kLandingChunk;
      p.issued.assign((p.chunks + 63) / 64, 0);
      p.t0 = std::chrono::steady_clock::now();
      if (map_->chunks(p.copy->partition) != p.chunks)
        return Status::Error(p.copy->src + ": the landing map does not match its size");
    }
    for (Part& p : parts_)  // (an empty partition has nothing to land)
      if (p.chunks == 0) FANSTORE_RETURN_IF_ERROR(Finish(p));
    cancel_ = cancel;
    // Several streams, each reading one partition in order (a FUSE client reads one file
    // ahead; 4 MiB reads in flight at several offsets of one file measured 2-3x slower on
    // MooseFS than a stream per file).
    std::vector<std::thread> streams;
    const size_t n = std::min<size_t>(kStreams, parts_.size());
    for (size_t i = 1; i < n; ++i) streams.emplace_back([this, i] { Stream(i); });
    Stream(0);
    for (std::thread& t : streams) t.join();
    return error_;
  }

 private:
  static constexpr size_t kStreams = 4;

  // The next chunk for stream `me`: one a reader waits for, else the next of the stream's
  // partition in order, else of the first partition no stream has taken, else of any.
  bool Pick(size_t me, size_t* part, uint64_t* chunk) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error_.ok()) return false;
    for (size_t i = 0; i < parts_.size(); ++i) {
      Part& p = parts_[i];
      if (p.finished) continue;
      const int64_t c = map_->NextWanted(p.copy->partition, p.issued);
      if (c >= 0 && static_cast<uint64_t>(c) < p.chunks)
        return Take(i, static_cast<uint64_t>(c), part, chunk);
    }
    if (own_.size() <= me) own_.resize(me + 1, kNone);
    auto next_of = [&](size_t i) -> bool {
      Part& p = parts_[i];
      while (p.next < p.chunks && (p.issued[p.next / 64] >> (p.next % 64) & 1)) ++p.next;
      return p.next < p.chunks && Take(i, p.next, part, chunk);
    };
    if (own_[me] != kNone && next_of(own_[me])) return true;
    for (size_t i = 0; i < parts_.size(); ++i)
      if (!parts_[i].taken && parts_[i].next < parts_[i].chunks) {
        parts_[i].taken = true;
        own_[me] = i;
        return next_of(i);
      }
    for (size_t i = 0; i < parts_.size(); ++i)
      if (next_of(i)) return true;
    return false;
  }
  bool Take(size_t i, uint64_t c, size_t* part, uint64_t* chunk) {
    parts_[i].issued[c / 64] |= uint64_t{1} << (c % 64);
    *part = i;
    *chunk = c;
    return true;
  }

  void Stream(size_t me) {
    std::unique_ptr<uint8_t[]> buf(new uint8_t[kLandingChunk]);
    size_t part = 0;
    uint64_t chunk = 0;
    while (Pick(me, &part, &chunk)) {
      if (opt_.chunk_delay_ms > 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(opt_.chunk_delay_ms));
      Status st = cancel_ && cancel_->load(std::memory_order_relaxed)
                      ? Status::Error("copy cancelled")
                      : CopyChunk(parts_[part], chunk, buf.get());
      if (st.ok()) st = Landed(part, chunk);
      if (!st.ok()) {
        std::lock_guard<std::mutex> lock(mu_);
        if (error_.ok()) error_ = st;
        return;
      }
    }
  }

  Status CopyChunk(const Part& p, uint64_t chunk, uint8_t* buf) {
    const uint64_t off = chunk * kLandingChunk;
    const size_t len = static_cast<size_t>(std::min<uint64_t>(kLandingChunk, p.size - off));
    bool no_room = false;
    return CopyBytes(p.in, p.out, off, len, buf, p.copy->src, p.copy->dst, &no_room);
  }

  // A chunk written: landed; the partition checked and renamed once all of it is (by the
  // stream that landed its last chunk).
  Status Landed(size_t part, uint64_t chunk) {
    Part& p = parts_[part];
    bool last = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (opt_.fail_after >= 0 && landed_total_ >= static_cast<uint64_t>(opt_.fail_after))
        return Status::Error(p.copy->src + ": copy failed (FANSTORE_TEST_COPY_FAIL_AFTER)");
      ++landed_total_;
      last = ++p.landed == p.chunks;
    }
    map_->Land(p.copy->partition, chunk);
    return last ? Finish(p) : Status::Ok();
  }

  Status Finish(Part& p) {
    ::close(p.out);
    p.out = -1;
    auto r = FinishCopy(p.copy->src, p.copy->dst + ".staging", p.copy->dst, manifest_,
                        p.copy->partition, p.size, /*check_members=*/false);
    if (!r.ok()) return r.status();
    r->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - p.t0).count();
    map_->SetState(p.copy->partition, LandingState::kDone);
    std::lock_guard<std::mutex> lock(mu_);
    p.finished = true;
    if (landed_) landed_(*p.copy, *r);
    return Status::Ok();
  }

  static constexpr size_t kNone = ~size_t{0};
  const meta::Manifest& manifest_;
  LandingMap* map_;
  LandingOptions opt_;
  const LandedFn& landed_;
  const std::atomic<bool>* cancel_ = nullptr;
  std::mutex mu_;  // guards the parts' cursors and bits, own_, error_, landed_total_
  std::vector<Part> parts_;
  std::vector<size_t> own_;  // the partition each stream reads in order
  Status error_;
  uint64_t landed_total_ = 0;
};

}  // namespace

Status StageLanding(const std::vector<LandingCopy>& copies, const meta::Manifest& manifest,
                    LandingMap* map, const LandingOptions& opt, const std::atomic<bool>* cancel,
                    const LandedFn& landed) {
  map->SetCopying(true);
  Status st;
  {
    Lander lander(copies, manifest, map, opt, landed);
    st = lander.Run(cancel);
  }
  map->SetCopying(false);
  return st;
}

}  // namespace fanstore::io
