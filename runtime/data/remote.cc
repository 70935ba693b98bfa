#include "runtime/data/remote.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

#include "base/raw_syscall.h"
#include "intercept/preload_log.h"
#include "io/node_cache.h"
#include "io/pieces.h"
#include "io/protocol.h"
#include "runtime/process/state.h"

namespace fanstore::runtime {
namespace {

using base::RawSyscall6;

struct Connection {
  int fd = -1;
  pid_t owner = 0;
  ~Connection() {
    if (fd >= 0 && Get() && owner == Get()->pid.load(std::memory_order_relaxed))
      RawSyscall6(SYS_close, fd);
  }
};
thread_local Connection t_conn;

bool Mapped(long r) {
  return static_cast<unsigned long>(r) < static_cast<unsigned long>(-4095);
}

// A process's mapping of the node cache arena: the whole file read-only, its "used" flags
// part writable.
struct ArenaMapping {
  io::ArenaView view;
  long map = -1, size = 0, refs = -1, refs_size = 0;
  ~ArenaMapping() {
    if (Mapped(map)) RawSyscall6(SYS_munmap, map, size);
    if (Mapped(refs)) RawSyscall6(SYS_munmap, refs, refs_size);
  }
};

// Maps the arena of this node's agent; nullptr when there is none or it does not match
// this namespace.
ArenaMapping* MapArena(State& s) {
  if (s.node_cache.empty()) return nullptr;
  const std::string path = s.node_cache + "/arena";
  const long fd =
      RawSyscall6(SYS_openat, AT_FDCWD, reinterpret_cast<long>(path.c_str()), O_RDWR | O_CLOEXEC);
  if (fd < 0) return nullptr;
  auto* m = new ArenaMapping();
  struct stat st;
  io::ArenaHeader h{};
  if (RawSyscall6(SYS_fstat, fd, reinterpret_cast<long>(&st)) == 0 &&
      static_cast<uint64_t>(st.st_size) >= sizeof h) {
    m->size = st.st_size;
    m->map = RawSyscall6(SYS_mmap, 0, m->size, PROT_READ, MAP_SHARED, fd, 0);
  }
  if (Mapped(m->map)) {
    std::memcpy(&h, reinterpret_cast<const void*>(m->map), sizeof h);
    if (h.refs_offset % 4096 == 0 && h.data_offset > h.refs_offset &&
        h.data_offset <= static_cast<uint64_t>(m->size)) {
      m->refs_size = static_cast<long>(h.data_offset - h.refs_offset);
      m->refs = RawSyscall6(SYS_mmap, 0, m->refs_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                            static_cast<long>(h.refs_offset));
    }
  }
  RawSyscall6(SYS_close, fd);
  if (Mapped(m->map) && Mapped(m->refs) &&
      m->view.Attach(reinterpret_cast<const uint8_t*>(m->map), static_cast<uint64_t>(m->size),
                     reinterpret_cast<uint8_t*>(m->refs), static_cast<uint32_t>(s.ns.size())))
    return m;
  intercept::Logger().warn("node cache {}: not usable here; members fetched are copied", path);
  delete m;
  return nullptr;
}

// The arena, mapped on first use and kept for the life of the process (forked children
// inherit the mapping). nullptr when unavailable: every miss then gets a private copy from
// the agent.
const io::ArenaView* Arena(State& s) {
  static std::atomic<uintptr_t> state{0};  // 0 not yet, 1 unavailable, else an ArenaMapping
  uintptr_t v = state.load(std::memory_order_acquire);
  if (v == 0) {
    ArenaMapping* m = MapArena(s);
    const uintptr_t made = m ? reinterpret_cast<uintptr_t>(m) : 1;
    if (state.compare_exchange_strong(v, made, std::memory_order_acq_rel)) {
      v = made;
    } else {
      delete m;  // another thread attached first (v is its result)
    }
  }
  return v == 1 ? nullptr : &reinterpret_cast<ArenaMapping*>(v)->view;
}

long Connect(State& s) {
  const long fd = RawSyscall6(SYS_socket, AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return fd;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (s.agent.size() >= sizeof addr.sun_path) {
    RawSyscall6(SYS_close, fd);
    return -ENAMETOOLONG;
  }
  std::memcpy(addr.sun_path, s.agent.c_str(), s.agent.size() + 1);
  const long rc = RawSyscall6(SYS_connect, fd, reinterpret_cast<long>(&addr), sizeof addr);
  if (rc < 0) {
    RawSyscall6(SYS_close, fd);
    return rc;
  }
  // Into the runtime's reserved range when there is room, away from the application's fds.
  if (s.reserved_lo > 0) {
    const long moved = RawSyscall6(SYS_fcntl, fd, F_DUPFD_CLOEXEC, s.reserved_lo);
    if (moved >= 0) {
      RawSyscall6(SYS_close, fd);
      return moved;
    }
  }
  return fd;
}

void Drop() {
  if (t_conn.fd >= 0) RawSyscall6(SYS_close, t_conn.fd);
  t_conn.fd = -1;
}

// This process's numbering of the pieces of large members: built from the namespace image
// on the first read of a remote member over io::kPiecedAbove (one pass over the entries:
// processes that read only smaller members never make it), kept for the life of the process.
// Without memory for it, the index is empty: nothing is pieced in this process, and its
// large members are fetched whole, as before pieces (the hook must not throw).
const io::PieceIndex& Pieces(State& s) {
  static std::atomic<io::PieceIndex*> built{nullptr};
  static io::PieceIndex none;
  io::PieceIndex* p = built.load(std::memory_order_acquire);
  if (p) return *p;
  auto* mine = new (std::nothrow) io::PieceIndex();
  if (!mine) return none;
  try {
    mine->Build(s.ns);
  } catch (const std::bad_alloc&) {
    delete mine;
    return none;
  }
  if (built.compare_exchange_strong(p, mine, std::memory_order_acq_rel)) return *mine;
  delete mine;  // another thread built it first (p is its index)
  return *p;
}

// A member or piece's name for messages.
std::string NameOf(State& s, uint32_t key) {
  return Pieces(s).Name(key, s.ns);
}

// One request to the agent: 0 (the member is in the arena; *fd stays -1), 0 with *fd (a
// private file), or a negative errno.
long Ask(State& s, uint32_t entry, io::LocalOp op, int* fd) {
  const pid_t me = s.pid.load(std::memory_order_relaxed);
  if (t_conn.owner != me) {  // a forked child: the inherited connection is the parent's
    if (t_conn.fd >= 0) RawSyscall6(SYS_close, t_conn.fd);
    t_conn.fd = -1;
    t_conn.owner = me;
  }
  if (t_conn.fd < 0) {
    const long c = Connect(s);
    if (c < 0) {
      intercept::Logger().error("node agent {}: cannot connect ({})", s.agent,
                                std::strerror(static_cast<int>(-c)));
      return -EIO;
    }
    t_conn.fd = static_cast<int>(c);
  }
  io::LocalRequest req{op, entry};
  long rc;
  do {
    rc = RawSyscall6(SYS_sendto, t_conn.fd, reinterpret_cast<long>(&req), sizeof req, MSG_NOSIGNAL,
                     0, 0);
  } while (rc == -EINTR);
  if (rc != static_cast<long>(sizeof req)) {
    Drop();
    return -EIO;
  }
  pollfd p{t_conn.fd, POLLIN, 0};
  const timespec limit{s.agent_timeout_ms / 1000, (s.agent_timeout_ms % 1000) * 1'000'000L};
  do {
    rc =
        RawSyscall6(SYS_ppoll, reinterpret_cast<long>(&p), 1, reinterpret_cast<long>(&limit), 0, 0);
  } while (rc == -EINTR);
  if (rc <= 0) {  // the agent did not answer in time: a late reply must not meet the next request
    intercept::Logger().error("member {}: the node agent did not answer within {} ms",
                              NameOf(s, entry), s.agent_timeout_ms);
    Drop();
    return -EIO;
  }
  io::LocalReply rep{};
  iovec iov{&rep, sizeof rep};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  do {
    rc = RawSyscall6(SYS_recvmsg, t_conn.fd, reinterpret_cast<long>(&msg), MSG_CMSG_CLOEXEC);
  } while (rc == -EINTR);
  if (rc != static_cast<long>(sizeof rep)) {
    Drop();
    return -EIO;
  }
  int got = -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
      std::memcpy(&got, CMSG_DATA(c), sizeof got);
  if (rep.status != 0 || (rep.where == io::Where::kInFile) != (got >= 0)) {
    if (got >= 0) RawSyscall6(SYS_close, got);
    intercept::Logger().error("member {}: the node agent could not fetch it ({})", NameOf(s, entry),
                              std::strerror(rep.status ? -rep.status : EPROTO));
    return -EIO;
  }
  *fd = got;
  return 0;
}

// A member's or piece's stored bytes (`len` of them), from the arena or the agent.
long FetchKey(State& s, uint32_t entry, uint64_t len, bool want_fd, RemoteSource* out) {
  if (s.agent.empty()) return -EIO;  // no agent: nothing can be remote
  const io::ArenaView* arena = want_fd ? nullptr : Arena(s);
  auto find = [&] {
    const uint8_t* bytes = nullptr;
    const uint64_t w = arena ? arena->Find(entry, len, &bytes) : 0;
    if (w) *out = RemoteSource{bytes, w, -1};
    return w != 0;
  };
  if (find()) return 0;
  int fd = -1;
  if (arena) {
    if (const long rc = Ask(s, entry, io::LocalOp::kFetch, &fd); rc < 0) return rc;
    // In the arena now, unless evicted again before we looked (a node cache far smaller
    // than what the node's processes read at once): then a private copy.
    if (fd < 0 && find()) return 0;
  }
  if (fd < 0) {
    if (const long rc = Ask(s, entry, io::LocalOp::kFetchCopy, &fd); rc < 0) return rc;
    if (fd < 0) return -EIO;  // (a copy always comes with its descriptor)
  }
  *out = RemoteSource{nullptr, 0, fd};
  return 0;
}

}  // namespace

long FetchRemote(uint32_t entry, bool want_fd, RemoteSource* out) {
  State& s = *Get();
  return FetchKey(s, entry, s.ns.entry(entry).stored_size, want_fd, out);
}

bool RemotePieced(uint32_t entry) {
  State& s = *Get();
  return io::Pieced(s.ns.entry(entry)) && !s.agent.empty() && Pieces(s).enabled(entry);
}

uint32_t RemotePieceKey(uint32_t entry, uint64_t p) {
  return Pieces(*Get()).Key(entry, p);
}

long FetchRemotePiece(uint32_t entry, uint64_t p, bool want_fd, RemoteSource* out) {
  State& s = *Get();
  return FetchKey(s, RemotePieceKey(entry, p), io::PieceLength(s.ns.entry(entry).stored_size, p),
                  want_fd, out);
}

bool RemoteStill(uint32_t key, uint64_t word) {
  const io::ArenaView* arena = Arena(*Get());
  return arena && arena->Still(key, word);
}

uint64_t NodeCacheBytes() {
  const io::ArenaView* arena = Arena(*Get());
  return arena ? arena->data_bytes() : 0;
}

}  // namespace fanstore::runtime
