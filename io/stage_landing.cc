#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "base/map_aligned.h"
#include "base/page_size.h"
#include "io/stage.h"
#include "io/stage_parts.h"

namespace fanstore::io {
namespace {

// One partition's copy: its files, its chunks issued (one bit each) and landed.
struct Part {
  const LandingCopy* copy;
  int in = -1, out = -1;
  int again = -1;  // its own handle on DATA for the copy from the page cache (OpenAgain)
  int aside = -1;  // its handle for chunks out of order (OpenAside), opened at the first
  bool aside_tried = false;
  uint64_t size = 0, chunks = 0, landed = 0, next = 0;  // next: the sequential cursor
  std::vector<uint64_t> issued;
  uint8_t* map = nullptr;  // the copy, written through (tmpfs: MapForLanding)
  bool finished = false;
  bool taken = false;       // a stream reads it in order
  bool copy_taken = false;  // (fetched first) a thread copies it
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
    if (sink_ >= 0) ::close(sink_);
    for (Part& p : parts_) {
      if (p.map) ::munmap(p.map, p.size);
      if (p.in >= 0) ::close(p.in);
      if (p.again >= 0) ::close(p.again);
      if (p.aside >= 0) ::close(p.aside);
      if (p.out >= 0) ::close(p.out);
      if (!p.finished) {
        ::unlink((p.copy->dst + ".staging").c_str());
        map_->SetState(p.copy->partition, LandingState::kFailed);
      }
    }
  }

  Status Run(const std::atomic<bool>* cancel) {
    for (Part& p : parts_) {
      bool no_room = false, seeded = false;
      auto size = OpenCopy(p.copy->src, p.copy->dst + ".staging", p.copy->dst, manifest_,
                           p.copy->partition, &p.in, &p.out, &no_room, &seeded);
      if (!size.ok()) return size.status();
      p.size = *size;
      p.chunks = (p.size + map_->chunk_bytes() - 1) / map_->chunk_bytes();
      total_chunks_ += p.chunks;
      p.issued.assign((p.chunks + 63) / 64, 0);
      p.t0 = std::chrono::steady_clock::now();
      // (a FUSE client or NFS reads further ahead of a stream it is told is sequential)
      ::posix_fadvise(p.in, 0, 0, POSIX_FADV_SEQUENTIAL);
      if (seeded) MapForLanding(p);
      if (map_->chunks(p.copy->partition) != p.chunks)
        return Status::Error(p.copy->src + ": the landing map does not match its size");
    }
    from_data_ = !opt_.copy_first && KeepsPages();
    if (from_data_) sink_ = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    map_->SetFromData(from_data_);
    for (Part& p : parts_)  // (an empty partition has nothing to land)
      if (p.chunks == 0) FANSTORE_RETURN_IF_ERROR(Finish(p));
    cancel_ = cancel;
    fetch_t0_ = std::chrono::steady_clock::now();
    // Several streams, each reading one partition in order (a FUSE client reads one file
    // ahead; 4 MiB reads in flight at several offsets of one file measured 2-3x slower on
    // MooseFS than a stream per file).
    std::vector<std::thread> streams;
    const size_t n = std::min<size_t>(kStreams, parts_.size());
    for (size_t i = 1; i < n; ++i) streams.emplace_back([this, i] { Stream(i); });
    std::thread urgent([this] { Urgent(); });
    Stream(0);
    for (std::thread& t : streams) t.join();
    streams_done_ = true;
    map_->Nudge();
    urgent.join();
    if (!error_.ok() || !from_data_) return error_;
    // Every chunk is in DATA's page cache, where readers read it: now the copies, behind
    // anything else that wants the CPU (the first epoch's readers, on a node the fetch kept
    // busy), each partition by one thread, through a handle of its own: what the kernel
    // dropped since it landed (reclaim) is read again alone, not with the stream's read-ahead.
    for (Part& p : parts_) {
      if (p.finished) continue;
      if (p.again < 0) p.again = OpenAgain(p.in, p.copy->src);
      if (p.again >= 0) {
        ::close(p.in);
        p.in = std::exchange(p.again, -1);
      }
    }
    streams.clear();
    for (size_t i = 1; i < n; ++i) streams.emplace_back([this] { CopyParts(); });
    CopyParts();
    for (std::thread& t : streams) t.join();
    return error_;
  }

 private:
  static constexpr size_t kStreams = 4;

  // Whether DATA's file system keeps what is read in the page cache, so that a fetched
  // chunk can be read there: the first page of every partition (fanrun's set-up read it,
  // the header) is read, the file opened again as a reader would, and the page found still
  // cached. A file system that reads around the page cache (FUSE's direct_io) or drops it
  // at each open says no, and the chunks land in the copy instead. The second handle is
  // kept for the copy from the page cache (one open of DATA per partition, not two).
  bool KeepsPages() {
    std::vector<uint8_t> head(base::PageSize());
    for (Part& p : parts_) {
      if (p.size < head.size()) continue;
      if (::pread(p.in, head.data(), head.size(), 0) != static_cast<ssize_t>(head.size()))
        return false;
      p.again = OpenAgain(p.in, p.copy->src);
      if (p.again < 0) return false;
      void* m = ::mmap(nullptr, head.size(), PROT_READ, MAP_SHARED, p.again, 0);
      if (m == MAP_FAILED) return false;
      unsigned char v = 0;
      const bool cached = ::mincore(m, head.size(), &v) == 0 && (v & 1);
      ::munmap(m, head.size());
      if (!cached) return false;
    }
    return true;
  }

  // A chunk a reader waits for that no stream has taken and its partition's stream is not
  // expected to reach soon (FarFrom).
  bool PickWanted(size_t* part, uint64_t* chunk, int* fd) {
    const Pace pace = MeasurePace();
    for (size_t i = 0; i < parts_.size(); ++i) {
      Part& p = parts_[i];
      if (p.finished) continue;
      const int64_t c = map_->NextWanted(p.copy->partition, p.issued, FarFrom(p, pace));
      if (c >= 0 && static_cast<uint64_t>(c) < p.chunks)
        return Take(i, static_cast<uint64_t>(c), part, chunk, fd);
    }
    return false;
  }

  // The next chunk for stream `me`: one a reader waits for, else the next of the stream's
  // partition in order, else of the first partition no stream has taken, else of any.
  bool Pick(size_t me, size_t* part, uint64_t* chunk, int* fd) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error_.ok()) return false;
    if (PickWanted(part, chunk, fd)) return true;
    if (own_.size() <= me) own_.resize(me + 1, kNone);
    auto next_of = [&](size_t i) -> bool {
      Part& p = parts_[i];
      while (p.next < p.chunks && (p.issued[p.next / 64] >> (p.next % 64) & 1)) ++p.next;
      return p.next < p.chunks && Take(i, p.next, part, chunk, fd);
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
  // The first chunk of `p` its stream is not expected to reach within opt_.in_order_ns, at
  // the copy's pace so far (every chunk landed over the time since the fetch began): wanted
  // chunks before it are left to the stream. A partition no stream reads yet is reached
  // once the chunks not issued are. The pace is measured first: nothing is taken out of
  // order until kPaceChunks have landed (the first chunks carry the streams' start; 16 MiB
  // land in tens of milliseconds on a link that makes waiting worth it) or kPaceNs have
  // passed, so that no reader waits much longer than in_order_ns; a copy that has landed
  // nothing by then has no pace to wait for. (Under mu_.)
  static constexpr uint64_t kPaceChunks = 8;
  static constexpr int64_t kPaceNs = 100'000'000;
  // The pace, once per pick: what every partition's FarFrom needs.
  struct Pace {
    enum { kAny, kNone, kKnown } state;
    double within = 0;   // chunks all streams land within in_order_ns
    double streams = 1;  // streams reading a partition in order
  };
  Pace MeasurePace() const {
    if (opt_.in_order_ns <= 0) return {Pace::kAny};
    const int64_t elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                std::chrono::steady_clock::now() - fetch_t0_)
                                .count();
    if (landed_total_ < std::min(kPaceChunks, total_chunks_)) {
      if (elapsed < kPaceNs) return {Pace::kNone};
      if (landed_total_ == 0) return {Pace::kAny};
    }
    const double per_chunk = static_cast<double>(elapsed) / static_cast<double>(landed_total_);
    size_t open = 0;
    for (const Part& q : parts_) open += q.next < q.chunks;
    return {Pace::kKnown, static_cast<double>(opt_.in_order_ns) / per_chunk,
            static_cast<double>(std::max<size_t>(1, std::min(kStreams, open)))};
  }
  uint64_t FarFrom(const Part& p, const Pace& pace) const {
    if (pace.state != Pace::kKnown) return pace.state == Pace::kAny ? 0 : p.chunks;
    if (!p.taken) return static_cast<double>(total_chunks_ - issued_) < pace.within ? p.chunks : 0;
    return std::min<uint64_t>(p.chunks, p.next + static_cast<uint64_t>(pace.within / pace.streams));
  }
  bool Take(size_t i, uint64_t c, size_t* part, uint64_t* chunk, int* fd) {
    *fd = HandleFor(parts_[i], c);
    ++issued_;
    parts_[i].issued[c / 64] |= uint64_t{1} << (c % 64);
    *part = i;
    *chunk = c;
    return true;
  }
  // The handle a chunk is read through: the partition's stream's for the chunk in order (or
  // any once the stream has passed the end), else the one aside (under mu_).
  int HandleFor(Part& p, uint64_t chunk) {
    if (chunk == p.next || p.next >= p.chunks) return p.in;
    if (!p.aside_tried) {
      p.aside_tried = true;
      p.aside = OpenAside(p.in, p.copy->src);
    }
    return p.aside >= 0 ? p.aside : p.in;
  }

  void Stream(size_t me) {
    std::unique_ptr<uint8_t[]> buf(new uint8_t[map_->chunk_bytes()]);
    size_t part = 0;
    uint64_t chunk = 0;
    int fd = -1;
    while (Pick(me, &part, &chunk, &fd))
      if (!CopyAndLand(part, chunk, fd, buf.get())) return;
  }

  // The urgent stream: chunks readers wait for, started the moment one is asked for. The
  // other streams take them too, but only when one finishes its chunk, which put half a
  // chunk's read before each wanted one on a reader's wait. Sleeps on the map's want count
  // between them; ends with the others.
  void Urgent() {
    std::unique_ptr<uint8_t[]> buf(new uint8_t[map_->chunk_bytes()]);
    while (!streams_done_.load()) {
      const uint32_t seen = map_->WantCount();
      size_t part = 0;
      uint64_t chunk = 0;
      int fd = -1;
      bool got = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!error_.ok()) return;
        got = PickWanted(&part, &chunk, &fd);
      }
      if (!got)
        map_->WaitForWant(seen, 50'000'000);
      else if (!CopyAndLand(part, chunk, fd, buf.get()))
        return;
    }
  }

  // A chunk fetched into DATA's page cache (read into `buf`, which is then dropped) or
  // copied, through `in` (HandleFor), and landed. False (the copy's error recorded) when it
  // failed.
  bool CopyAndLand(size_t part, uint64_t chunk, int in, uint8_t* buf) {
    for (int waited = 0; waited < opt_.chunk_delay_ms && !Cancelled(); waited += 10)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // (tests: a slow copy)
    Status st = Cancelled()  ? Status::Error("copy cancelled")
                : from_data_ ? Fetch(parts_[part], chunk, in, buf)
                             : CopyChunk(parts_[part], chunk, in, buf);
    if (st.ok()) st = Landed(part, chunk);
    return Record(st);
  }
  bool Cancelled() const { return cancel_ && cancel_->load(std::memory_order_relaxed); }
  bool Record(const Status& st) {
    if (st.ok()) return true;
    std::lock_guard<std::mutex> lock(mu_);
    if (error_.ok()) error_ = st;
    return false;
  }

  // A chunk's offset in its partition, and its length (the last one may be short).
  std::pair<uint64_t, size_t> Span(const Part& p, uint64_t chunk) const {
    const uint64_t off = chunk * map_->chunk_bytes();
    return {off, static_cast<size_t>(std::min<uint64_t>(map_->chunk_bytes(), p.size - off))};
  }

  Status Fetch(const Part& p, uint64_t chunk, int in, uint8_t* buf) {
    const auto [off, len] = Span(p, chunk);
    return FetchAt(in, sink_, buf, off, len, p.copy->src);
  }

  // The second phase of a fetched copy: the partitions no thread has taken, each copied
  // from DATA's page cache chunk by chunk, then checked and renamed. At the lowest CPU
  // priority: it is off every reader's path (their bytes are cached), and the readers of
  // the first epoch would otherwise share the CPU with it.
  void CopyParts() {
    ::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), 19);
    std::unique_ptr<uint8_t[]> buf(new uint8_t[map_->chunk_bytes()]);
    for (;;) {
      Part* p = nullptr;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!error_.ok()) return;
        for (Part& q : parts_)
          if (!q.finished && !q.copy_taken) {
            q.copy_taken = true;
            p = &q;
            break;
          }
      }
      if (!p) return;
      for (uint64_t c = 0; c < p->chunks; ++c)
        if (!Record(Cancelled() ? Status::Error("copy cancelled")
                                : CopyChunk(*p, c, p->in, buf.get())))
          return;
      if (!Record(Cancelled() ? Status::Error("copy cancelled") : Finish(*p))) return;
    }
  }

  // A copy on tmpfs is written through a mapping of it, each chunk made huge pages before
  // its bytes are read in: MADV_COLLAPSE turns the chunk's seed pages (OpenCopy) into 2 MiB
  // folios while nobody maps them, and the read lands in them, one copy with no buffer
  // between. Collapsing the whole copy after it landed cost 0.1-0.4 s per 50 MiB partition
  // on the first epoch's path once readers had mapped its pages (the kernel unmaps them from
  // every reader), and could be refused (EAGAIN) while one copied out. A chunk the kernel
  // does not collapse stays small pages; FinishCopy tries the whole copy again and says so.
  void MapForLanding(Part& p) {
    const long m = base::MapHugeAligned(p.out, p.size, PROT_READ | PROT_WRITE);
    if (m >= 0) p.map = reinterpret_cast<uint8_t*>(m);
  }

  Status CopyChunk(const Part& p, uint64_t chunk, int in, uint8_t* buf) {
    const auto [off, len] = Span(p, chunk);
    bool no_room = false;
    if (!p.map) return CopyBytes(in, p.out, off, len, buf, p.copy->src, p.copy->dst, &no_room);
    ::madvise(p.map + off, len, base::kMadvCollapse);
    return ReadIntoCopy(in, p.map + off, off, len, p.copy->src, p.copy->dst);
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
    // (CMD is done: checking a copy nobody will read would hold up the job's end)
    if (last && Cancelled()) return Status::Error("copy cancelled");
    map_->Land(p.copy->partition, chunk);
    return last && !from_data_ ? Finish(p) : Status::Ok();
  }

  Status Finish(Part& p) {
    if (p.map) ::munmap(p.map, p.size);
    p.map = nullptr;
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
  bool from_data_ = false;  // chunks land in DATA's page cache, and are copied after
  int sink_ = -1;           // /dev/null, where fetched chunks are spliced (FetchAt)
  std::atomic<bool> streams_done_{false};
  std::chrono::steady_clock::time_point fetch_t0_;  // (the pace: FarFrom)
  std::mutex mu_;  // guards the parts' cursors and bits, own_, error_, landed_total_
  std::vector<Part> parts_;
  std::vector<size_t> own_;  // the partition each stream reads in order
  Status error_;
  uint64_t landed_total_ = 0;
  uint64_t total_chunks_ = 0, issued_ = 0;  // (issued_ under mu_)
};

}  // namespace

Status StageLanding(const std::vector<LandingCopy>& copies, const meta::Manifest& manifest,
                    LandingMap* map, const LandingOptions& opt, const std::atomic<bool>* cancel,
                    const LandedFn& landed) {
  if (!opt.readers_read_in_place) map->SetCopying(true);
  Status st;
  {
    Lander lander(copies, manifest, map, opt, landed);
    st = lander.Run(cancel);
  }
  map->SetCopying(false);
  return st;
}

}  // namespace fanstore::io
