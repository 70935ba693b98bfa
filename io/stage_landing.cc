#include <fcntl.h>
#include <liburing.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "io/stage.h"
#include "io/stage_parts.h"

namespace fanstore::io {
namespace {

constexpr unsigned kInFlight = 4;

// One partition's copy: its files, its chunks issued (one bit each) and landed.
struct Part {
  const LandingCopy* copy;
  int in = -1, out = -1;
  uint64_t size = 0, chunks = 0, landed = 0, next = 0;  // next: the sequential cursor
  std::vector<uint64_t> issued;
  bool finished = false;
  std::chrono::steady_clock::time_point t0;
};

// A chunk on its way: read into buf, then written.
struct Slot {
  std::unique_ptr<uint8_t[]> buf{new uint8_t[kLandingChunk]};
  size_t part = 0;
  uint64_t chunk = 0, off = 0;
  size_t len = 0, done = 0;
  bool writing = false;
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
    io_uring ring;
    const bool uring = io_uring_queue_init(2 * kInFlight, &ring, 0) == 0;
    Status st = uring ? RunRing(&ring, cancel) : RunPlain(cancel);
    if (uring) io_uring_queue_exit(&ring);
    return st;
  }

 private:
  // The next chunk to copy: one a reader waits for, else the next in order.
  bool Pick(size_t* part, uint64_t* chunk) {
    for (size_t i = 0; i < parts_.size(); ++i) {
      Part& p = parts_[i];
      if (p.finished) continue;
      const int64_t c = map_->NextWanted(p.copy->partition, p.issued);
      if (c >= 0 && static_cast<uint64_t>(c) < p.chunks) {
        *part = i;
        *chunk = static_cast<uint64_t>(c);
        return Issue(p);
      }
    }
    for (size_t i = 0; i < parts_.size(); ++i) {
      Part& p = parts_[i];
      while (p.next < p.chunks && (p.issued[p.next / 64] >> (p.next % 64) & 1)) ++p.next;
      if (p.next < p.chunks) {
        *part = i;
        *chunk = p.next;
        return Issue(p);
      }
    }
    return false;
  }
  bool Issue(Part&) {
    if (opt_.chunk_delay_ms > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(opt_.chunk_delay_ms));
    return true;
  }
  void MarkIssued(Part& p, uint64_t c) { p.issued[c / 64] |= uint64_t{1} << (c % 64); }

  // A chunk written: landed; the partition checked and renamed once all of it is.
  Status Landed(size_t part, uint64_t chunk) {
    Part& p = parts_[part];
    if (opt_.fail_after >= 0 && landed_total_ >= static_cast<uint64_t>(opt_.fail_after))
      return Status::Error(p.copy->src + ": copy failed (FANSTORE_TEST_COPY_FAIL_AFTER)");
    map_->Land(p.copy->partition, chunk);
    ++landed_total_;
    if (++p.landed == p.chunks) return Finish(p);
    return Status::Ok();
  }

  Status Finish(Part& p) {
    ::close(p.out);
    p.out = -1;
    auto r = FinishCopy(p.copy->src, p.copy->dst + ".staging", p.copy->dst, manifest_,
                        p.copy->partition, p.size);
    if (!r.ok()) return r.status();
    r->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - p.t0).count();
    p.finished = true;
    map_->SetState(p.copy->partition, LandingState::kDone);
    if (landed_) landed_(*p.copy, *r);
    return Status::Ok();
  }

  Status RunPlain(const std::atomic<bool>* cancel) {
    Slot s;
    while (Pick(&s.part, &s.chunk)) {
      if (cancel && cancel->load(std::memory_order_relaxed)) return Status::Error("copy cancelled");
      Part& p = parts_[s.part];
      MarkIssued(p, s.chunk);
      const uint64_t off = s.chunk * kLandingChunk;
      const size_t len = static_cast<size_t>(std::min<uint64_t>(kLandingChunk, p.size - off));
      for (size_t got = 0; got < len;) {
        const ssize_t n =
            ::pread(p.in, s.buf.get() + got, len - got, static_cast<off_t>(off + got));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
          return n == 0 ? Status::Error(p.copy->src + ": shorter than expected")
                        : Status::FromErrno(p.copy->src, errno);
        got += static_cast<size_t>(n);
      }
      for (size_t put = 0; put < len;) {
        const ssize_t n =
            ::pwrite(p.out, s.buf.get() + put, len - put, static_cast<off_t>(off + put));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return Status::FromErrno(p.copy->dst, errno);
        put += static_cast<size_t>(n);
      }
      FANSTORE_RETURN_IF_ERROR(Landed(s.part, s.chunk));
    }
    return Status::Ok();
  }

  Status RunRing(io_uring* ring, const std::atomic<bool>* cancel) {
    std::vector<Slot> slots(kInFlight);
    unsigned busy = 0;
    Status st;
    auto submit = [&](Slot& s, size_t idx) {
      io_uring_sqe* sqe = io_uring_get_sqe(ring);
      const Part& p = parts_[s.part];
      if (s.writing)
        io_uring_prep_write(sqe, p.out, s.buf.get() + s.done, static_cast<unsigned>(s.len - s.done),
                            s.off + s.done);
      else
        io_uring_prep_read(sqe, p.in, s.buf.get() + s.done, static_cast<unsigned>(s.len - s.done),
                           s.off + s.done);
      io_uring_sqe_set_data64(sqe, idx);
      ++busy;
    };
    auto start = [&](size_t idx) {
      Slot& s = slots[idx];
      if (!Pick(&s.part, &s.chunk)) return;
      Part& p = parts_[s.part];
      MarkIssued(p, s.chunk);
      s.off = s.chunk * kLandingChunk;
      s.len = static_cast<size_t>(std::min<uint64_t>(kLandingChunk, p.size - s.off));
      s.done = 0;
      s.writing = false;
      submit(s, idx);
    };
    for (size_t i = 0; i < slots.size(); ++i) start(i);
    while (busy > 0) {
      if (cancel && st.ok() && cancel->load(std::memory_order_relaxed))
        st = Status::Error("copy cancelled");  // (drains what is in flight)
      io_uring_submit_and_wait(ring, 1);
      io_uring_cqe* cqe;
      unsigned head, seen = 0;
      std::vector<size_t> free;
      io_uring_for_each_cqe(ring, head, cqe) {
        ++seen;
        const size_t idx = io_uring_cqe_get_data64(cqe);
        Slot& s = slots[idx];
        const int res = cqe->res;
        --busy;
        if (!st.ok()) continue;  // draining after an error
        const Part& p = parts_[s.part];
        if (res < 0 || (res == 0 && !s.writing)) {
          st = res == 0 ? Status::Error(p.copy->src + ": shorter than expected")
                        : Status::FromErrno(s.writing ? p.copy->dst : p.copy->src, -res);
          continue;
        }
        s.done += static_cast<size_t>(res);
        if (s.done < s.len) {
          submit(s, idx);
        } else if (!s.writing) {
          s.writing = true;
          s.done = 0;
          submit(s, idx);
        } else {
          free.push_back(idx);
        }
      }
      io_uring_cq_advance(ring, seen);
      // (landed after the completions are consumed: a partition's check may take a while)
      for (size_t idx : free) {
        if (st.ok()) st = Landed(slots[idx].part, slots[idx].chunk);
        if (st.ok()) start(idx);
      }
    }
    return st;
  }

  const meta::Manifest& manifest_;
  LandingMap* map_;
  LandingOptions opt_;
  const LandedFn& landed_;
  std::vector<Part> parts_;
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
