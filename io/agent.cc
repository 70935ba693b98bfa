#include "io/agent.h"

#include <fcntl.h>
#include <mpi.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <tsl/robin_map.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <list>
#include <mutex>
#include <spdlog/spdlog.h>

#include "compress/crc32c.h"
#include "io/node_cache.h"
#include "io/protocol.h"
#include "io/resident.h"

namespace fanstore::io {

using Clock = std::chrono::steady_clock;

namespace {

constexpr int kPostedRequests = 8;
// The node cache's pages are allocated this far past its head while replies are awaited,
// in steps short enough (~20 us) that a reply is not kept waiting.
constexpr uint64_t kPreallocateAhead = 8ull << 20;
constexpr uint64_t kPreallocateStep = 128ull << 10;
constexpr uint64_t kMaxAhead = 1ull << 30;  // (a request's `focus` is 32 bits)
// Fetching ahead is turned off when, of at least this many members fetched ahead that left
// the node cache, most left it unread.
constexpr uint64_t kAheadVerdict = 256;
// Entries looked at on each side of a missed member for its neighbours.
constexpr uint32_t kMaxScan = 4096;

// Sends a reply (and a descriptor when fd >= 0: the member is in that file) on a client
// connection; a client that has gone away is not an error for the agent.
void Reply(int conn, int32_t status, int fd) {
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

}  // namespace

struct Agent::Loop {
  AgentConfig cfg;
  meta::NamespaceView ns;
  std::vector<int> blob_fds;
  std::vector<const uint8_t*> blob_maps;  // nullptr: not mapped (served with pread)
  std::vector<uint64_t> blob_sizes;
  // io::AlwaysResident blobs (staged copies on tmpfs): replies are sent from the mapping
  // without asking mincore.
  std::vector<uint8_t> blob_in_memory;
  int listen_fd = -1, epoll_fd = -1, wake_fd = -1;
  int nodes = 1, tag_ub = 32767, next_tag = kFirstReplyTag;

  // Control from the owning thread.
  std::atomic<bool> finish_requested{false}, stop_requested{false};
  std::mutex mu;
  std::condition_variable cv;
  bool stopped = false;  // the job has ended (guarded by mu)
  bool job_stop = false;  // a stop (not just this rank's finish) was seen

  mutable std::mutex stats_mu;
  AgentStats stats;

  // Server side.
  struct Posted {
    RemoteRequest req;
    MPI_Request handle = MPI_REQUEST_NULL;
  };
  Posted posted[kPostedRequests];
  int stop_msg = 0;
  MPI_Request stop_handle = MPI_REQUEST_NULL;
  struct Outgoing {
    RemoteReplyHeader header;
    std::unique_ptr<uint8_t[]> buf;  // the bytes read (nullptr when sent from the mapping)
    std::vector<MPI_Request> handles;
  };
  std::list<Outgoing> outgoing;
  uint64_t corrupt_left = 0;

  // Client side.
  struct Waiter {
    int conn;
    bool copy;  // wants a descriptor of a private copy (kFetchCopy)
    uint32_t entry;
  };
  // One request to one holder and the receives of its reply: everything MPI may still
  // write into lives here, so an attempt that timed out is set aside whole until MPI is done
  // with it (its receives stay posted, for a late reply), and a retry gets a new one.
  struct Attempt {
    int owner = -1, tag = 0;
    RemoteRequest req{};
    MPI_Request send = MPI_REQUEST_NULL;
    std::vector<MPI_Request> recvs;  // the header, then the data chunks
    RemoteReplyHeader header{};
    std::unique_ptr<uint8_t[]> buf;  // the stored bytes
  };
  // A member of a fetched range: where its stored bytes are in the range.
  struct Member {
    uint32_t entry;
    uint64_t off, len;
  };
  struct Fetch {
    uint32_t entry;  // the member asked for first (the key in `fetches`)
    std::vector<Member> members;  // by offset: it and the members fetched ahead with it
    std::vector<uint8_t> bad;     // per member, once checked: its bytes are damaged
    std::vector<Waiter> waiters;
    std::vector<uint32_t> owners;
    size_t owner_idx = 0;
    bool retried = false;
    RemoteRequest req{};
    std::unique_ptr<Attempt> at;
    Clock::time_point deadline;
  };
  tsl::robin_map<uint32_t, std::unique_ptr<Fetch>> fetches;
  tsl::robin_map<uint32_t, uint32_t> joined;  // every member in flight -> its fetch's key
  uint64_t ahead_bytes = 0;  // the fetch-ahead block in use (0: off)
  std::vector<MPI_Request> abandoned;  // sends nobody waits for, tested until done
  std::vector<std::unique_ptr<Attempt>> set_aside;  // timed out, until MPI lets go of them
  std::vector<uint32_t> fetch_keys;  // ProgressFetches' snapshot of `fetches`
  std::vector<Clock::time_point> suspect_until;

  NodeCache arena;  // members fetched before, shared with the node's processes
  bool arena_failed = false;

  MPI_Request barrier = MPI_REQUEST_NULL;
  bool in_barrier = false;

  void Count(uint64_t AgentStats::*field, uint64_t n = 1) {
    std::lock_guard<std::mutex> lk(stats_mu);
    stats.*field += n;
  }

  Status Open();
  void Run();
  void PostRequest(int i) {
    MPI_Irecv(&posted[i].req, sizeof(RemoteRequest), MPI_BYTE, MPI_ANY_SOURCE, kTagRequest,
              MPI_COMM_WORLD, &posted[i].handle);
  }
  bool ProgressServer();
  const uint8_t* Resident(uint32_t p, uint64_t off, uint64_t len);
  std::vector<unsigned char> mincore_vec;
  void Serve(const RemoteRequest& req, int source);
  bool ProgressFetches();
  void StartFetch(uint32_t entry, Waiter w);
  std::vector<Member> RangeAround(uint32_t entry);
  bool Verify(Fetch& f);
  void CheckAhead();
  int32_t SendToNextOwner(Fetch& f);
  std::unique_ptr<Attempt> NewAttempt(const Fetch& f);
  void SetAside(std::unique_ptr<Attempt> a);
  void TestLeftovers();
  bool TestOutgoing();
  void Complete(Fetch& f, int32_t status);
  void HandleClient(int conn);
  void Accept();
  int MakeCopy(uint32_t entry, const uint8_t* bytes, uint64_t len);
  void BroadcastStop();
  void DropWaiter(int conn);
  void Withdraw();
};

Status Agent::Loop::Open() {
  corrupt_left = cfg.corrupt_replies;
  suspect_until.assign(1, Clock::time_point{});
  if (cfg.mpi) {
    int flag = 0;
    int* ub = nullptr;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    if (flag && ub) tag_ub = *ub;
    MPI_Comm_size(MPI_COMM_WORLD, &nodes);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    suspect_until.assign(static_cast<size_t>(nodes), Clock::time_point{});
  }
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
      void* m = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, blob_fds[p], 0);
      if (m != MAP_FAILED) {
        blob_maps[p] = static_cast<const uint8_t*>(m);
        blob_sizes[p] = static_cast<uint64_t>(st.st_size);
        struct statfs fs;
        blob_in_memory[p] = ::fstatfs(blob_fds[p], &fs) == 0 && AlwaysResident(cfg.staged, fs.f_type);
      }
    }
  }
  if (::mkdir(cfg.cache_dir.c_str(), 0700) != 0 && errno != EEXIST)
    return Status::FromErrno(cfg.cache_dir, errno);
  if (cfg.mpi) {
    if (Status st = arena.Create(cfg.cache_dir + "/arena", static_cast<uint32_t>(ns.size()), cfg.cache_bytes);
        !st.ok())
      return st;
  }
  if (cfg.mpi && cfg.fetch_ahead > 0) {
    // Blocks of a power of two bytes, no larger than a member the cache keeps.
    ahead_bytes = uint64_t{1} << (63 - __builtin_clzll(std::min({cfg.fetch_ahead, arena.max_member(), kMaxAhead}) | 1));
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
  if (cfg.mpi) {
    for (Posted& p : posted) p.handle = MPI_REQUEST_NULL;
    for (int i = 0; i < kPostedRequests; ++i) PostRequest(i);
    MPI_Irecv(&stop_msg, 1, MPI_INT, MPI_ANY_SOURCE, kTagStop, MPI_COMM_WORLD, &stop_handle);
  }
  return Status::Ok();
}

// The blob bytes [off, off + len) of partition p when every page of them is in the page
// cache: they are then sent straight from the mapping, without a read copy. A page that is
// not (a cold blob served in place) sends the request to pread, so the loop never waits on
// a page fault, and a blob cut shorter than it was never faults (SIGBUS) here.
const uint8_t* Agent::Loop::Resident(uint32_t p, uint64_t off, uint64_t len) {
  // (bounds first: a length past the blob must not size the vector)
  if (len == 0 || off > blob_sizes[p] || len > blob_sizes[p] - off) return nullptr;
  if (!blob_in_memory[p]) mincore_vec.resize(SpannedPages(off, len));
  return ResidentBytes(blob_maps[p], blob_sizes[p], off, len, blob_in_memory[p], mincore_vec.data(),
                       [](const uint8_t* at, uint64_t n, unsigned char* v) {
                         return ::mincore(const_cast<uint8_t*>(at), n, v);
                       });
}

void Agent::Loop::Serve(const RemoteRequest& req, int source) {
  Outgoing& out = outgoing.emplace_back();  // list nodes stay put while MPI sends from them
  RemoteReplyHeader& h = out.header;
  h = RemoteReplyHeader{0, 0, 0};
  const uint64_t len = req.length;
  const uint8_t* data = nullptr;
  if (req.partition >= blob_fds.size() || blob_fds[req.partition] < 0) {
    h.status = -ENOENT;  // we do not hold that partition (a placement disagreement)
  } else if (!(data = Resident(req.partition, req.offset, len)) || corrupt_left > 0) {
    out.buf.reset(new (std::nothrow) uint8_t[std::max<uint64_t>(len, 1)]);
    if (!out.buf) h.status = -ENOMEM;
    for (uint64_t done = 0; h.status == 0 && done < len;) {
      const ssize_t n = ::pread(blob_fds[req.partition], out.buf.get() + done, len - done,
                                static_cast<off_t>(req.offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) h.status = n < 0 ? -errno : -EIO;
      done += n > 0 ? static_cast<uint64_t>(n) : 0;
    }
    data = out.buf.get();
  }
  if (h.status == 0) {
    h.length = len;
    if (!(req.flags & kNoTransferCrc)) h.crc32c = compress::Crc32c(0, data, len);
    if (corrupt_left > 0 && len > 0) {  // fault injection (tests): a damaged transfer
      --corrupt_left;
      out.buf[req.focus < len ? req.focus : len / 2] ^= 0x5a;  // in the member asked for
    }
  }
  MPI_Request r;
  MPI_Isend(&h, sizeof h, MPI_BYTE, source, req.reply_tag, MPI_COMM_WORLD, &r);
  out.handles.push_back(r);
  // Exactly the data messages the requester posted, empty after an error.
  const uint64_t chunks = RemoteChunks(len);
  for (uint64_t i = 0; i < chunks; ++i) {
    const uint64_t off = i * kRemoteChunk;
    const uint64_t n = h.status == 0 ? std::min(kRemoteChunk, len - off) : 0;
    MPI_Isend(h.status == 0 ? data + off : nullptr, static_cast<int>(n), MPI_BYTE, source,
              req.reply_tag, MPI_COMM_WORLD, &r);
    out.handles.push_back(r);
  }
  Count(&AgentStats::served);
  Count(&AgentStats::served_bytes, h.length);
}

bool Agent::Loop::ProgressServer() {
  bool active = false;
  for (int i = 0; i < kPostedRequests; ++i) {
    int done = 0;
    MPI_Status st;
    MPI_Test(&posted[i].handle, &done, &st);
    if (!done) continue;
    active = true;
    const RemoteRequest req = posted[i].req;
    PostRequest(i);
    Serve(req, st.MPI_SOURCE);
  }
  active |= TestOutgoing();
  if (stop_handle != MPI_REQUEST_NULL) {
    int done = 0;
    MPI_Test(&stop_handle, &done, MPI_STATUS_IGNORE);
    if (done) {
      job_stop = true;
      active = true;
    }
  }
  return active;
}

// A new attempt of a fetch, with a buffer for the bytes; nullptr when there is no memory.
// (Receiving straight into the node cache was measured: no faster, because the agent then
// maps every cache page too; docs/design.md.)
std::unique_ptr<Agent::Loop::Attempt> Agent::Loop::NewAttempt(const Fetch& f) {
  auto a = std::make_unique<Attempt>();
  a->req = f.req;
  a->buf.reset(new (std::nothrow) uint8_t[std::max<uint64_t>(f.req.length, 1)]);
  if (a->buf) return a;
  spdlog::error("member '{}': no memory for its {} bytes", ns.path(ns.entry(f.entry)), f.req.length);
  return nullptr;
}

// Keeps an attempt that timed out until MPI has finished with it. Its receives stay posted:
// a holder that answers late (stopped, not dead) must be able to complete its sends, or it
// would wait for them at the end of the job (a cancelled receive leaves a large reply's
// rendezvous unanswered).
void Agent::Loop::SetAside(std::unique_ptr<Attempt> a) {
  set_aside.push_back(std::move(a));
}

// Tests the sends nobody waits for and the attempts set aside; frees what MPI is done with.
void Agent::Loop::TestLeftovers() {
  for (size_t i = 0; i < abandoned.size();) {
    int done = 0;
    MPI_Test(&abandoned[i], &done, MPI_STATUS_IGNORE);
    if (done) {
      abandoned[i] = abandoned.back();
      abandoned.pop_back();
    } else {
      ++i;
    }
  }
  for (size_t i = 0; i < set_aside.size();) {
    Attempt& a = *set_aside[i];
    int recvd = 0, sent = 0;
    MPI_Testall(static_cast<int>(a.recvs.size()), a.recvs.data(), &recvd, MPI_STATUSES_IGNORE);
    MPI_Test(&a.send, &sent, MPI_STATUS_IGNORE);
    if (recvd && sent) {  // MPI writes nothing there any more: the buffer can go
      set_aside[i] = std::move(set_aside.back());
      set_aside.pop_back();
    } else {
      ++i;
    }
  }
}

// Tests the replies this node is sending; true when one completed.
bool Agent::Loop::TestOutgoing() {
  bool any = false;
  for (auto it = outgoing.begin(); it != outgoing.end();) {
    int done = 0;
    MPI_Testall(static_cast<int>(it->handles.size()), it->handles.data(), &done,
                MPI_STATUSES_IGNORE);
    if (done) {
      it = outgoing.erase(it);
      any = true;
    } else {
      ++it;
    }
  }
  return any;
}

// Sends the fetch's request to its next holder that is not suspected: 0, or -EIO when none
// is left, -ENOMEM when there is no memory for the reply.
int32_t Agent::Loop::SendToNextOwner(Fetch& f) {
  const auto now = Clock::now();
  while (f.owner_idx < f.owners.size()) {
    const uint32_t o = f.owners[f.owner_idx];
    if (suspect_until[o] > now) {
      ++f.owner_idx;
      continue;
    }
    if (!f.at && !(f.at = NewAttempt(f))) return -ENOMEM;
    Attempt& a = *f.at;  // new, or one whose receives have all completed (a CRC retry)
    if (a.send != MPI_REQUEST_NULL) abandoned.push_back(a.send);
    a.owner = static_cast<int>(o);
    // A reply tag still posted by an attempt set aside for this holder (its late reply may
    // yet come) is not given out again when the tags wrap round.
    auto in_use = [&](int tag) {
      return std::any_of(set_aside.begin(), set_aside.end(),
                         [&](const auto& s) { return s->owner == a.owner && s->tag == tag; });
    };
    do {
      a.tag = next_tag++;
      if (next_tag > tag_ub) next_tag = kFirstReplyTag;
    } while (!set_aside.empty() && in_use(a.tag));
    a.req.reply_tag = a.tag;
    MPI_Isend(&a.req, sizeof a.req, MPI_BYTE, a.owner, kTagRequest, MPI_COMM_WORLD, &a.send);
    a.recvs.assign(1, MPI_REQUEST_NULL);
    MPI_Irecv(&a.header, sizeof a.header, MPI_BYTE, a.owner, a.tag, MPI_COMM_WORLD, &a.recvs[0]);
    for (uint64_t off = 0; off < a.req.length; off += kRemoteChunk) {
      MPI_Request r;
      MPI_Irecv(a.buf.get() + off, static_cast<int>(std::min(kRemoteChunk, a.req.length - off)),
                MPI_BYTE, a.owner, a.tag, MPI_COMM_WORLD, &r);
      a.recvs.push_back(r);
    }
    f.deadline = now + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(cfg.timeout_s));
    return 0;
  }
  return -EIO;
}

// The members to fetch for `entry`: it and, fetching ahead, the members of its blob that
// start in the same aligned block and are neither cached nor in flight, by offset. The image
// lists a partition's members in blob order (both are path order), so they are the entries
// next to it; a member listed elsewhere is only missed, never taken wrongly.
std::vector<Agent::Loop::Member> Agent::Loop::RangeAround(uint32_t entry) {
  const meta::ImageEntry& e = ns.entry(entry);
  std::vector<Member> out;
  if (ahead_bytes > 0 && e.stored_size <= arena.max_member()) {
    const uint64_t lo = e.data_offset / ahead_bytes * ahead_bytes, hi = lo + ahead_bytes;
    // Adds entry x if it is a neighbour to fetch; false once x is past the block.
    auto take = [&](uint32_t x) {
      const meta::ImageEntry& m = ns.entry(x);
      if (m.kind != static_cast<uint8_t>(meta::Kind::kFile)) return true;  // (directories)
      if (m.partition != e.partition || m.data_offset < lo || m.data_offset >= hi) return false;
      if (m.stored_size > 0 && m.stored_size <= arena.max_member() && !arena.Contains(x) &&
          !joined.contains(x))
        out.push_back(Member{x, m.data_offset, m.stored_size});
      return true;
    };
    const uint32_t first = entry > kMaxScan ? entry - kMaxScan : 0;
    const uint32_t last = static_cast<uint32_t>(std::min<uint64_t>(ns.size(), uint64_t{entry} + kMaxScan));
    for (uint32_t x = entry; x-- > first && take(x);) {
    }
    for (uint32_t x = entry + 1; x < last && take(x); ++x) {
    }
  }
  out.push_back(Member{entry, e.data_offset, e.stored_size});
  std::sort(out.begin(), out.end(), [](const Member& a, const Member& b) { return a.off < b.off; });
  return out;
}

void Agent::Loop::StartFetch(uint32_t entry, Waiter w) {
  if (auto j = joined.find(entry); j != joined.end()) {
    fetches.find(j->second).value()->waiters.push_back(w);
    Count(&AgentStats::deduplicated);
    return;
  }
  const meta::ImageEntry& e = ns.entry(entry);
  auto f = std::make_unique<Fetch>();
  f->entry = entry;
  f->waiters.push_back(w);
  const bool bcast = e.partition < cfg.broadcast.size() && cfg.broadcast[e.partition];
  f->owners = cfg.placement.Owners(e.partition, bcast);
  // Spread the load over the replicas: start at a rank-dependent holder.
  if (f->owners.size() > 1)
    std::rotate(f->owners.begin(),
                f->owners.begin() + static_cast<long>(static_cast<uint32_t>(cfg.rank) % f->owners.size()),
                f->owners.end());
  f->owners.erase(std::remove(f->owners.begin(), f->owners.end(), static_cast<uint32_t>(cfg.rank)),
                  f->owners.end());
  if (!cfg.mpi) {  // one node holds everything: nothing to fetch
    Reply(w.conn, -EINVAL, -1);
    return;
  }
  f->members = RangeAround(entry);
  const uint64_t start = f->members.front().off;
  uint64_t end = start;
  bool raw = true;
  for (Member& m : f->members) {
    end = std::max(end, m.off + m.len);
    m.off -= start;  // from here on: in the range
    raw = raw && ns.entry(m.entry).codec == static_cast<uint8_t>(meta::Codec::kRaw);
    joined.emplace(m.entry, entry);
  }
  f->req = RemoteRequest{e.partition, 0, start, end - start, raw ? kNoTransferCrc : 0,
                         static_cast<uint32_t>(e.data_offset - start)};
  Fetch& ref = *f;
  fetches.emplace(entry, std::move(f));
  if (const int32_t rc = SendToNextOwner(ref); rc != 0) Complete(ref, rc);
}

// A private copy of a member's stored bytes: a sealed memfd, sent with replies to the
// processes that get copies (a member too large for the node cache, or a process that
// asked for one). -1 (logged) when it cannot be made.
int Agent::Loop::MakeCopy(uint32_t entry, const uint8_t* bytes, uint64_t len) {
  int fd = ::memfd_create("fanstore-member", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  int err = fd < 0 ? errno : 0;
  for (uint64_t done = 0; fd >= 0 && done < len;) {
    const ssize_t n = ::pwrite(fd, bytes + done, len - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : EIO;
      ::close(fd);
      fd = -1;
      break;
    }
    done += static_cast<uint64_t>(n);
  }
  if (fd < 0) {
    spdlog::error("member '{}': cannot make a copy for a local process: {}", ns.path(ns.entry(entry)),
                  std::strerror(err));
    return -1;
  }
  ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
  return fd;
}

// Finishes a fetch: on success each member whose bytes are good goes into the node cache
// (unless too large for it) and its waiters are told so, or get a private copy; a damaged
// one's waiters get EIO. On failure every waiter gets `status`. Erases the fetch.
void Agent::Loop::Complete(Fetch& f, int32_t status) {
  // An attempt still here has had all its receives completed; its request has reached the
  // holder, and a send MPI has not yet reported done is only tested from now on.
  if (f.at && f.at->send != MPI_REQUEST_NULL) {
    int sent = 0;
    MPI_Test(&f.at->send, &sent, MPI_STATUS_IGNORE);
    if (!sent) abandoned.push_back(f.at->send);
  }
  for (const Member& m : f.members) joined.erase(m.entry);
  if (status != 0) {
    Count(&AgentStats::failures);
    for (const Waiter& w : f.waiters) Reply(w.conn, status, -1);
    fetches.erase(f.entry);
    return;
  }
  Count(&AgentStats::fetched);
  Count(&AgentStats::fetched_bytes, f.req.length);
  const size_t n = f.members.size();
  std::vector<uint8_t> waited(n, 0), kept(n, 0);
  std::vector<int> copies(n, -2);  // a private copy, made once for every waiter that gets one
  auto index_of = [&](uint32_t entry) {
    size_t i = 0;
    while (i + 1 < n && f.members[i].entry != entry) ++i;
    return i;
  };
  for (const Waiter& w : f.waiters) waited[index_of(w.entry)] = 1;
  const uint64_t evicted = arena.evictions();
  uint64_t ahead = 0;
  auto admit = [&](size_t i) {
    const Member& m = f.members[i];
    if ((!f.bad.empty() && f.bad[i]) || m.len > arena.max_member()) return;
    const Status st = arena.Admit(m.entry, f.at->buf.get() + m.off, m.len, !waited[i]);
    kept[i] = st.ok();
    ahead += kept[i] && !waited[i];
    if (!kept[i] && !arena_failed) {  // said once: every later fetch would say it again
      spdlog::error("{} (members fetched from now on are handed out as private copies)", st.message());
      arena_failed = true;
    }
  };
  // The members processes wait for first: they are answered before the rest is copied.
  for (size_t i = 0; i < n; ++i)
    if (waited[i]) admit(i);
  for (const Waiter& w : f.waiters) {
    const size_t i = index_of(w.entry);
    if (!f.bad.empty() && f.bad[i]) {
      Reply(w.conn, -EIO, -1);
    } else if (kept[i] && !w.copy) {
      Reply(w.conn, 0, -1);
    } else {
      const Member& m = f.members[i];
      if (copies[i] == -2) copies[i] = MakeCopy(m.entry, f.at->buf.get() + m.off, m.len);
      Reply(w.conn, copies[i] >= 0 ? 0 : -EIO, copies[i]);
    }
  }
  for (int c : copies)
    if (c >= 0) ::close(c);
  for (size_t i = 0; i < n; ++i)
    if (!waited[i]) admit(i);
  Count(&AgentStats::evictions, arena.evictions() - evicted);
  Count(&AgentStats::fetched_ahead, ahead);
  fetches.erase(f.entry);
  CheckAhead();
}

// Fetching ahead pays only when the members fetched ahead are read before the cache lets
// them go; when most leave unread (a cache too small for the working set, or a node that
// reads only its share of a shuffled dataset) it only costs transfers and cache space.
void Agent::Loop::CheckAhead() {
  const uint64_t wasted = arena.ahead_wasted(), used = arena.ahead_used();
  {
    std::lock_guard<std::mutex> lk(stats_mu);
    stats.ahead_unread = wasted;
  }
  if (ahead_bytes == 0 || wasted + used < kAheadVerdict || wasted <= used) return;
  ahead_bytes = 0;
  spdlog::info("fetch-ahead turned off: {} of {} members fetched ahead left the node cache unread "
               "(a larger --cache-size may keep them until they are read)", wasted, wasted + used);
}

// Checks a completed reply's bytes: every raw member against its CRC32C in the namespace,
// the whole range against the header's CRC32C when it holds a compressed member. Marks
// damaged members in f.bad; true when a member somebody waits for is damaged.
bool Agent::Loop::Verify(Fetch& f) {
  Attempt& a = *f.at;
  const bool range_ok = (a.req.flags & kNoTransferCrc) ||
                        compress::Crc32c(0, a.buf.get(), a.req.length) == a.header.crc32c;
  f.bad.assign(f.members.size(), 0);
  bool waited_bad = false;
  for (size_t i = 0; i < f.members.size(); ++i) {
    const Member& m = f.members[i];
    const meta::ImageEntry& e = ns.entry(m.entry);
    const bool raw = e.codec == static_cast<uint8_t>(meta::Codec::kRaw);
    if (range_ok && (!raw || compress::Crc32c(0, a.buf.get() + m.off, m.len) == e.crc32c)) continue;
    f.bad[i] = 1;
    const bool waited = std::any_of(f.waiters.begin(), f.waiters.end(),
                                    [&](const Waiter& w) { return w.entry == m.entry; });
    if (!waited) {
      spdlog::debug("member '{}' from rank {}: damaged transfer (CRC mismatch), fetched ahead: left out",
                    ns.path(e), a.owner);
      continue;
    }
    waited_bad = true;
    spdlog::warn("member '{}' from rank {}: damaged transfer (CRC mismatch){}", ns.path(e), a.owner,
                 f.retried ? ", giving up" : ", retrying");
  }
  return waited_bad;
}

bool Agent::Loop::ProgressFetches() {
  bool active = false;
  std::vector<uint32_t>& keys = fetch_keys;  // (a member: no allocation per turn of the loop)
  keys.clear();
  for (auto& [entry, f] : fetches) keys.push_back(entry);
  const auto now = Clock::now();
  for (uint32_t entry : keys) {
    Fetch& f = *fetches.find(entry).value();
    Attempt& a = *f.at;
    int done = 0;
    MPI_Testall(static_cast<int>(a.recvs.size()), a.recvs.data(), &done, MPI_STATUSES_IGNORE);
    if (done) {
      active = true;
      int32_t status = a.header.status;
      if (status == 0 && a.header.length != a.req.length) status = -EIO;
      if (status == 0 && Verify(f) && !f.retried) {
        f.retried = true;
        Count(&AgentStats::crc_retries);
        if (SendToNextOwner(f) == 0) continue;
      }
      if (status != 0 && status != -EIO) {  // the holder could not read it: try another
        ++f.owner_idx;
        if (SendToNextOwner(f) == 0) continue;
      }
      Complete(f, status);
    } else if (now > f.deadline) {
      active = true;
      Count(&AgentStats::timeouts);
      spdlog::warn("rank {} did not answer within {} s: suspected for {} s", a.owner,
                   cfg.timeout_s, 10 * cfg.timeout_s);
      suspect_until[static_cast<size_t>(a.owner)] =
          now + std::chrono::duration_cast<Clock::duration>(
                    std::chrono::duration<double>(10 * cfg.timeout_s));
      SetAside(std::move(f.at));
      ++f.owner_idx;
      if (const int32_t rc = SendToNextOwner(f); rc != 0) Complete(f, rc);
    }
  }
  TestLeftovers();
  return active;
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
  if (req.entry >= ns.size() || ns.entry(req.entry).kind != static_cast<uint8_t>(meta::Kind::kFile)) {
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
    if (arena.Read(req.entry, ns.entry(req.entry).stored_size, &bytes)) {
      const int copy = MakeCopy(req.entry, bytes.data(), bytes.size());
      Reply(conn, copy >= 0 ? 0 : -EIO, copy);
      if (copy >= 0) ::close(copy);
      return;
    }
  }
  StartFetch(req.entry, Waiter{conn, copy, req.entry});
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
    MPI_Request req;
    MPI_Isend(&one, 1, MPI_INT, r, kTagStop, MPI_COMM_WORLD, &req);
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
      MPI_Ibarrier(MPI_COMM_WORLD, &barrier);
      in_barrier = true;
    }
    if (in_barrier) {
      int done = 0;
      MPI_Test(&barrier, &done, MPI_STATUS_IGNORE);
      if (done) break;
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
    const int n = ::epoll_pwait2(epoll_fd, events, 32, &timeout, nullptr);
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

void Agent::Loop::Withdraw() {
  for (Posted& p : posted) {
    if (p.handle == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&p.handle);
    MPI_Wait(&p.handle, MPI_STATUS_IGNORE);
  }
  if (stop_handle != MPI_REQUEST_NULL) {
    MPI_Cancel(&stop_handle);
    MPI_Wait(&stop_handle, MPI_STATUS_IGNORE);
  }
  // Replies still being sent, and late replies to attempts set aside, get as long as a fetch
  // does to finish (a peer also draining completes them); then they are given up.
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(cfg.timeout_s));
  for (;;) {
    TestOutgoing();
    TestLeftovers();
    if ((outgoing.empty() && set_aside.empty() && abandoned.empty()) || Clock::now() > deadline) break;
    ::sched_yield();
  }
  for (Outgoing& o : outgoing) abandoned.insert(abandoned.end(), o.handles.begin(), o.handles.end());
  // (attempts set aside stay allocated until the loop is destroyed)
  for (auto& a : set_aside) {
    for (MPI_Request& r : a->recvs) {
      if (r != MPI_REQUEST_NULL) MPI_Cancel(&r);
      abandoned.push_back(r);
    }
    abandoned.push_back(a->send);
  }
  for (MPI_Request& r : abandoned) {
    int done = 0;
    MPI_Test(&r, &done, MPI_STATUS_IGNORE);
    if (!done) MPI_Request_free(&r);
  }
}

Agent::Agent(AgentConfig cfg, meta::NamespaceView ns) : loop_(std::make_unique<Loop>()) {
  loop_->cfg = std::move(cfg);
  loop_->ns = ns;
}

Agent::~Agent() {
  Loop& l = *loop_;
  if (thread_.joinable())
    Finish();
  else if (l.cfg.mpi && l.listen_fd >= 0)
    l.Withdraw();  // opened, never started
  for (size_t p = 0; p < l.blob_maps.size(); ++p)
    if (l.blob_maps[p]) ::munmap(const_cast<uint8_t*>(l.blob_maps[p]), l.blob_sizes[p]);
  for (int fd : l.blob_fds)
    if (fd >= 0) ::close(fd);
  for (int fd : {l.listen_fd, l.epoll_fd, l.wake_fd})
    if (fd >= 0) ::close(fd);
  if (!l.cfg.socket_path.empty()) ::unlink(l.cfg.socket_path.c_str());
}

Status Agent::Open() {
  return loop_->Open();
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
