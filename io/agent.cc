#include "io/agent.h"

#include <fcntl.h>
#include <sched.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "io/agent_loop.h"
#include "io/resident.h"

namespace fanstore::io {
namespace {

// epoll_pwait2 (kernel 5.11) waits for as little as the agent's 20 us; on an older kernel
// (RHEL 8's 4.18) epoll_wait's whole milliseconds, a shorter wait taking 1 ms. Called by
// the agent's thread only. (Through syscall(2): glibc has the wrapper only since 2.35.)
int WaitForEvents(int epfd, epoll_event* events, int max, const timespec& timeout) {
  static bool have_pwait2 = true;
  if (have_pwait2) {
    const long n = ::syscall(SYS_epoll_pwait2, epfd, events, max, &timeout, nullptr, 0);
    if (n >= 0 || errno != ENOSYS) return static_cast<int>(n);
    have_pwait2 = false;
  }
  const long ns = timeout.tv_sec * 1'000'000'000L + timeout.tv_nsec;
  return ::epoll_wait(epfd, events, max,
                      ns == 0 ? 0 : static_cast<int>((ns + 999'999) / 1'000'000));
}

// The node cache's pages are allocated this far past its head while replies are awaited,
// in steps short enough (~20 us) that a reply is not kept waiting.
constexpr uint64_t kPreallocateAhead = 8ull << 20;
constexpr uint64_t kPreallocateStep = 128ull << 10;
constexpr uint64_t kMaxAhead = 1ull << 30;  // (a request's `focus` is 32 bits)
constexpr uint64_t kPopulateBudget = 1ull << 30;

}  // namespace

void Agent::Loop::Reply(int conn, int32_t status, int fd) {
  LocalReply r{status, fd >= 0 ? Where::kInFile : Where::kInArena};
  iovec iov{&r, sizeof r};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  }
  ::sendmsg(conn, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
}

Status Agent::Loop::OpenStorage(uint32_t entries, uint64_t fetchable) {
  blob_fds.assign(cfg.blob_paths.size(), -1);
  blob_maps.assign(cfg.blob_paths.size(), nullptr);
  blob_sizes.assign(cfg.blob_paths.size(), 0);
  blob_in_memory.assign(cfg.blob_paths.size(), 0);
  for (size_t p = 0; p < cfg.blob_paths.size(); ++p) {
    if (cfg.blob_paths[p].empty()) continue;
    blob_fds[p] = ::open(cfg.blob_paths[p].c_str(), O_RDONLY | O_CLOEXEC);
    if (blob_fds[p] < 0) return Status::FromErrno(cfg.blob_paths[p], errno);
    struct stat st;
    if (::fstat(blob_fds[p], &st) == 0 && st.st_size > 0) {
      void* m =
          ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, blob_fds[p], 0);
      if (m != MAP_FAILED) {
        blob_maps[p] = static_cast<const uint8_t*>(m);
        blob_sizes[p] = static_cast<uint64_t>(st.st_size);
        struct statfs fs;
        blob_in_memory[p] =
            ::fstatfs(blob_fds[p], &fs) == 0 && AlwaysResident(cfg.staged, fs.f_type);
      }
    }
  }
  // Staged blobs are mapped page by page at start, so that a transfer from them (MPI pins
  // the holder's pages) does not fault in this process's page tables while the job reads:
  // ~0.44 s and 2 MiB of page tables per GiB here, so only for a staged share of at most
  // kPopulateBudget (larger shares fault their pages in as they are sent, as before).
  uint64_t staged_bytes = 0;
  for (size_t p = 0; p < blob_maps.size(); ++p)
    staged_bytes += blob_in_memory[p] ? blob_sizes[p] : 0;
  for (size_t p = 0; p < blob_maps.size() && staged_bytes <= kPopulateBudget; ++p)
    if (blob_in_memory[p])
      ::madvise(const_cast<uint8_t*>(blob_maps[p]), blob_sizes[p], MADV_POPULATE_READ);
  if (!cfg.landing_path.empty()) {
    landing = LandingMap::Attach(cfg.landing_path);
    if (!landing.valid()) return Status::Error(cfg.landing_path + ": not a landing map");
    cfg.copy_paths.resize(cfg.blob_paths.size());
    staging_fds.assign(cfg.blob_paths.size(), -1);
    moved.assign(cfg.blob_paths.size(), 0);
    cache_ahead_due = true;  // (once the copies have ended: ProgressLanding)
  }
  if (::mkdir(cfg.cache_dir.c_str(), 0700) != 0 && errno != EEXIST)
    return Status::FromErrno(cfg.cache_dir, errno);
  fetchable_bytes = fetchable;
  return cfg.mpi ? arena.Create(cfg.cache_dir + "/arena", entries, cfg.cache_bytes) : Status::Ok();
}

// The node cache's first lap allocated ahead, up to what this node may fetch: allocating its
// tmpfs pages one by one as members arrive was the largest part of a first remote read
// (docs/scaling.md). The node's memory use is the same as when the first epoch has filled
// the cache; a job that reads less allocates ahead of need, at most --cache-size. A disk
// without room for it is a warning: the cache is then allocated as members arrive.
void Agent::Loop::AllocateCacheAhead() {
  if (!cfg.mpi) return;
  const auto start = Clock::now();
  if (Status st = arena.AllocateUpTo(fetchable_bytes); !st.ok()) {
    spdlog::warn("{}: cannot allocate the node cache ahead ({}); it is allocated as members arrive",
                 cfg.cache_dir, st.message());
    return;
  }
  spdlog::debug("node cache: {} bytes allocated in {:.3f} s", arena.preallocated_bytes(),
                std::chrono::duration<double>(Clock::now() - start).count());
}

Status Agent::Loop::Open(meta::NamespaceView view) {
  ns = view;
  corrupt_left = cfg.corrupt_replies;
  suspect_until.assign(1, Clock::time_point{});
  if (cfg.mpi) {
    tag_ub = mpi::World().TagUpperBound();
    nodes = mpi::World().Size();
    mpi::World().ReturnErrors();
    suspect_until.assign(static_cast<size_t>(nodes), Clock::time_point{});
    // The cache was made for the manifest's count of entries and a bound of the pieces; a
    // namespace that needs more keys (a manifest that does not match its partitions'
    // indexes) gets one made for it.
    pieces.Build(ns);
    if (arena.entries() < pieces.keys()) {
      spdlog::debug("node cache: made for {} keys, the namespace needs {}: made again",
                    arena.entries(), pieces.keys());
      if (Status st = arena.Create(cfg.cache_dir + "/arena", static_cast<uint32_t>(pieces.keys()),
                                   cfg.cache_bytes);
          !st.ok())
        return st;
      AllocateCacheAhead();
    }
  }
  if (cfg.mpi && cfg.fetch_ahead > 0) {
    // Blocks of a power of two bytes, no larger than a member the cache keeps.
    ahead_bytes =
        uint64_t{1} << (63 - __builtin_clzll(
                                 std::min({cfg.fetch_ahead, arena.max_member(), kMaxAhead}) | 1));
    if (ahead_bytes < 2 * kArenaAlign) ahead_bytes = 0;
  }
  listen_fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (cfg.socket_path.size() >= sizeof addr.sun_path)
    return Status::Error(cfg.socket_path + ": socket path too long");
  std::memcpy(addr.sun_path, cfg.socket_path.c_str(), cfg.socket_path.size() + 1);
  ::unlink(cfg.socket_path.c_str());
  if (::bind(listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd, 128) != 0)
    return Status::FromErrno(cfg.socket_path, errno);
  epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  for (int fd : {listen_fd, wake_fd}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev);
  }
  std::fill(std::begin(server_handles), std::end(server_handles), mpi::kNoRequest);
  if (cfg.mpi) {
    for (int i = 0; i < kPostedRequests; ++i) PostRequest(i);
    mpi::World().Irecv(&stop_msg, sizeof stop_msg, mpi::kAnySource, kTagStop,
                       &server_handles[kStopSlot]);
  }
  return Status::Ok();
}

void Agent::Loop::DropWaiter(int conn) {
  for (auto& [entry, f] : fetches) {
    auto& w = f->waiters;
    w.erase(std::remove_if(w.begin(), w.end(), [conn](const Waiter& x) { return x.conn == conn; }),
            w.end());
  }
}

void Agent::Loop::HandleClient(int conn) {
  LocalRequest req;
  const ssize_t n = ::recv(conn, &req, sizeof req, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n != static_cast<ssize_t>(sizeof req)) {  // closed or garbage: drop the connection
    DropWaiter(conn);
    ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, conn, nullptr);
    ::close(conn);
    return;
  }
  switch (req.op) {
    case LocalOp::kPing:
      Reply(conn, 0, -1);
      return;
    case LocalOp::kStop:
      stop_requested.store(true);
      Reply(conn, 0, -1);
      return;
    case LocalOp::kFetch:
    case LocalOp::kFetchCopy:
      break;
    default:
      Reply(conn, -EINVAL, -1);
      return;
  }
  KeyRange kr;
  if (!RangeOf(req.entry, &kr)) {
    Reply(conn, -EINVAL, -1);
    return;
  }
  const bool copy = req.op == LocalOp::kFetchCopy;
  if (arena.Contains(req.entry)) {  // fetched before (the process looked just before we did)
    Count(&AgentStats::cache_hits);
    if (!copy) {
      Reply(conn, 0, -1);
      return;
    }
    std::vector<uint8_t> bytes;
    if (arena.Read(req.entry, kr.length, &bytes)) {
      const int copy = MakeCopy(req.entry, bytes.data(), bytes.size());
      Reply(conn, copy >= 0 ? 0 : -EIO, copy);
      if (copy >= 0) ::close(copy);
      return;
    }
  }
  const Waiter w{conn, copy, req.entry};
  StartFetch(req.entry, &w);
}

void Agent::Loop::Accept() {
  for (;;) {
    const int c = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c < 0) return;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = c;
    ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, c, &ev);
  }
}

void Agent::Loop::BroadcastStop() {
  int one = 1;
  for (int r = 0; r < nodes; ++r) {
    if (r == cfg.rank) continue;
    mpi::Request req;
    mpi::World().Isend(&one, sizeof one, r, kTagStop, &req);
    abandoned.push_back(req);
  }
}

void Agent::Loop::Run() {
  // Sleeps of tens of microseconds must not be stretched by the default 50 us timer slack.
  ::prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  auto last_active = Clock::now();
  bool broadcast_done = false;
  for (;;) {
    bool active = cfg.mpi && ProgressServer();
    active |= cfg.mpi && ProgressLanding();
    active |= cfg.mpi && ProgressFetches();
    if (stop_requested.load() && !broadcast_done) {
      if (cfg.mpi) BroadcastStop();  // the stop started here (a peer's stop is not passed on again)
      broadcast_done = true;
      job_stop = true;
    }
    // This rank is done once its own work is (or the job was stopped) and nothing of its own
    // is in flight; it then keeps serving until every rank is done (the barrier).
    if (!in_barrier && (finish_requested.load() || job_stop) && fetches.empty()) {
      if (!cfg.mpi) break;
      mpi::World().Ibarrier(&barrier);
      in_barrier = true;
    }
    if (in_barrier) {
      if (mpi::World().Test(&barrier)) break;
    }
    if (active) last_active = Clock::now();
    // Idle: sleep in epoll, briefly after recent activity, longer when quiet.
    const auto idle = Clock::now() - last_active;
    // A transfer in flight needs both agents to drive MPI progress (a rendezvous takes
    // several steps), and a node that just served is likely to be asked again: yield the
    // core instead of sleeping, so the next step costs a scheduling round when cores are
    // busy and nothing when they are free (first remote reads: +20% with 2 ranks, +34%
    // with 4, on 2 cores; local reads unchanged). A transfer that has not moved for 50 ms
    // (its peer is stopped or gone) no longer keeps the core: it is polled every 0.5 ms.
    // Requests waiting for this node's copy to land (ProgressLanding) are not transfers:
    // they wait on the copier's reads, polled as an idle loop polls, not with the core.
    timespec timeout{0, 0};
    const bool in_flight = !fetches.empty() || !outgoing.empty();
    const bool hot = idle < std::chrono::microseconds(500) ||
                     (in_flight && idle < std::chrono::milliseconds(50));
    if (!active && !fetches.empty() && arena.Preallocate(kPreallocateAhead, kPreallocateStep)) {
      // Waiting for a reply: the node cache's next pages are allocated meanwhile, instead
      // of by the admission that writes them (then polled again at once).
    } else if (!active && hot) {
      ::sched_yield();
    } else if (!active) {
      timeout.tv_nsec = idle < std::chrono::milliseconds(5) ? 20'000 : 500'000;
    }
    epoll_event events[32];
    const int n = WaitForEvents(epoll_fd, events, 32, timeout);
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      last_active = Clock::now();
      if (fd == listen_fd) {
        Accept();
      } else if (fd == wake_fd) {
        uint64_t v;
        (void)!::read(wake_fd, &v, sizeof v);
      } else {
        HandleClient(fd);
      }
    }
  }
  // Every rank is done: withdraw what is still posted so MPI_Finalize finds nothing pending.
  if (cfg.mpi) Withdraw();
  std::lock_guard<std::mutex> lk(mu);
  stopped = true;
  cv.notify_all();
}

// Once per agent: the handles it frees are not looked at again (a second pass tested freed
// requests, which MPICH aborts on).
void Agent::Loop::Withdraw() {
  if (withdrawn) return;
  withdrawn = true;
  for (mpi::Request& h : server_handles) {
    if (h == mpi::kNoRequest) continue;
    mpi::World().Cancel(&h);
    mpi::World().Wait(&h);
  }
  // Replies still being sent, and late replies to attempts set aside, get as long as a fetch
  // does to finish (a peer also draining completes them); then they are given up.
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(cfg.timeout_s));
  for (;;) {
    TestOutgoing();
    TestLeftovers();
    if ((outgoing.empty() && set_aside.empty() && abandoned.empty()) || Clock::now() > deadline)
      break;
    ::sched_yield();
  }
  // (the buffers of replies and attempts given up stay allocated until the loop is destroyed:
  // MPI may still be reading from or writing into them)
  for (Outgoing& o : outgoing)
    for (mpi::Request& r : o.handles) abandoned.push_back(std::exchange(r, mpi::kNoRequest));
  for (auto& a : set_aside) {
    for (mpi::Request& r : a->recvs) {
      if (r != mpi::kNoRequest) mpi::World().Cancel(&r);
      abandoned.push_back(std::exchange(r, mpi::kNoRequest));
    }
    abandoned.push_back(std::exchange(a->send, mpi::kNoRequest));
  }
  for (mpi::Request& r : abandoned)
    if (!mpi::World().Test(&r)) mpi::World().Free(&r);
  abandoned.clear();
}

Agent::Agent(AgentConfig cfg) : loop_(std::make_unique<Loop>()) {
  loop_->cfg = std::move(cfg);
}

Agent::~Agent() {
  Loop& l = *loop_;
  if (thread_.joinable())
    Finish();
  else if (l.cfg.mpi && l.listen_fd >= 0)
    l.Withdraw();  // opened and never started, or already withdrawn at the end of its run
  for (size_t p = 0; p < l.blob_maps.size(); ++p)
    if (l.blob_maps[p]) ::munmap(const_cast<uint8_t*>(l.blob_maps[p]), l.blob_sizes[p]);
  for (const auto& [fd, map] : l.left_behind) {
    if (map.first) ::munmap(const_cast<uint8_t*>(map.first), map.second);
    if (fd >= 0) ::close(fd);
  }
  for (int fd : l.blob_fds)
    if (fd >= 0) ::close(fd);
  for (int fd : l.staging_fds)
    if (fd >= 0) ::close(fd);
  for (int fd : {l.listen_fd, l.epoll_fd, l.wake_fd})
    if (fd >= 0) ::close(fd);
  if (!l.cfg.socket_path.empty()) ::unlink(l.cfg.socket_path.c_str());
}

Status Agent::OpenStorage(uint32_t entries, uint64_t fetchable) {
  return loop_->OpenStorage(entries, fetchable);
}

void Agent::AllocateCacheAhead() {
  if (!loop_->cache_ahead_due) loop_->AllocateCacheAhead();  // (else the loop does, later)
}

Status Agent::Open(meta::NamespaceView ns) {
  return loop_->Open(ns);
}

void Agent::Start() {
  thread_ = std::thread([this] { loop_->Run(); });
}

void Agent::Finish() {
  loop_->finish_requested.store(true);
  const uint64_t one = 1;
  (void)!::write(loop_->wake_fd, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
}

void Agent::RequestStop() {
  loop_->stop_requested.store(true);
  Finish();
}

void Agent::RequestStopFromSignal() {
  loop_->stop_requested.store(true);
  const uint64_t one = 1;
  (void)!::write(loop_->wake_fd, &one, sizeof one);
}

void Agent::WaitUntilStopped() {
  std::unique_lock<std::mutex> lk(loop_->mu);
  loop_->cv.wait(lk, [&] { return loop_->stopped; });
  lk.unlock();
  if (thread_.joinable()) thread_.join();
}

AgentStats Agent::Stats() const {
  std::lock_guard<std::mutex> lk(loop_->stats_mu);
  return loop_->stats;
}

}  // namespace fanstore::io
