#include "runtime/remote.h"

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

#include "intercept/preload_log.h"
#include "intercept/raw_syscall.h"
#include "io/node_cache.h"
#include "io/protocol.h"
#include "runtime/state.h"

namespace fanstore::runtime {
namespace {

using intercept::RawSyscall6;

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

// The node cache arena, mapped on first use (read-only, with its small "used" flags part
// writable) and kept for the life of the process; forked children inherit the mapping.
// nullptr when there is none or it does not match this namespace (every miss then gets a
// private copy from the agent).
const io::ArenaView* Arena(State& s) {
  static std::atomic<uintptr_t> state{0};  // 0 not yet, 1 unavailable, else the view
  uintptr_t v = state.load(std::memory_order_acquire);
  if (v != 0) return v == 1 ? nullptr : reinterpret_cast<const io::ArenaView*>(v);
  uintptr_t made = 1;
  const std::string path = s.node_cache + "/arena";
  const long fd = s.node_cache.empty() ? -ENOENT
                                       : RawSyscall6(SYS_openat, AT_FDCWD, reinterpret_cast<long>(path.c_str()),
                                                     O_RDWR | O_CLOEXEC);
  struct stat st;
  if (fd >= 0 && RawSyscall6(SYS_fstat, fd, reinterpret_cast<long>(&st)) == 0 &&
      static_cast<uint64_t>(st.st_size) >= sizeof(io::ArenaHeader)) {
    const long size = st.st_size;
    const long map = RawSyscall6(SYS_mmap, 0, size, PROT_READ, MAP_SHARED, fd, 0);
    io::ArenaHeader h;
    long refs = -EINVAL;
    if (Mapped(map)) {
      std::memcpy(&h, reinterpret_cast<const void*>(map), sizeof h);
      if (h.refs_offset % 4096 == 0 && h.data_offset > h.refs_offset && h.data_offset <= static_cast<uint64_t>(size))
        refs = RawSyscall6(SYS_mmap, 0, static_cast<long>(h.data_offset - h.refs_offset),
                           PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<long>(h.refs_offset));
    }
    auto* view = new io::ArenaView();
    if (Mapped(map) && Mapped(refs) &&
        view->Attach(reinterpret_cast<const uint8_t*>(map), static_cast<uint64_t>(size),
                     reinterpret_cast<uint8_t*>(refs), static_cast<uint32_t>(s.ns.size()))) {
      made = reinterpret_cast<uintptr_t>(view);
    } else {
      delete view;
      if (Mapped(map)) RawSyscall6(SYS_munmap, map, size);
      if (Mapped(refs)) RawSyscall6(SYS_munmap, refs, static_cast<long>(h.data_offset - h.refs_offset));
      intercept::Logger().warn("node cache {}: not usable here; members fetched are copied", path);
    }
  }
  if (fd >= 0) RawSyscall6(SYS_close, fd);
  uintptr_t expected = 0;
  if (state.compare_exchange_strong(expected, made, std::memory_order_acq_rel)) return made == 1 ? nullptr : reinterpret_cast<const io::ArenaView*>(made);
  // Another thread attached first: ours is a second mapping of the same file, left in place
  // (this happens at most once per racing thread).
  return expected == 1 ? nullptr : reinterpret_cast<const io::ArenaView*>(expected);
}

long Connect(State& s) {  const long fd = RawSyscall6(SYS_socket, AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
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
      intercept::Logger().error("node agent {}: cannot connect ({})", s.agent, std::strerror(static_cast<int>(-c)));
      return -EIO;
    }
    t_conn.fd = static_cast<int>(c);
  }
  io::LocalRequest req{op, entry};
  long rc;
  do {
    rc = RawSyscall6(SYS_sendto, t_conn.fd, reinterpret_cast<long>(&req), sizeof req, MSG_NOSIGNAL, 0, 0);
  } while (rc == -EINTR);
  if (rc != static_cast<long>(sizeof req)) {
    Drop();
    return -EIO;
  }
  pollfd p{t_conn.fd, POLLIN, 0};
  do {
    rc = RawSyscall6(SYS_poll, reinterpret_cast<long>(&p), 1, s.agent_timeout_ms);
  } while (rc == -EINTR);
  if (rc <= 0) {  // the agent did not answer in time: a late reply must not meet the next request
    intercept::Logger().error("member '{}': the node agent did not answer within {} ms",
                              s.ns.path(s.ns.entry(entry)), s.agent_timeout_ms);
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
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) std::memcpy(&got, CMSG_DATA(c), sizeof got);
  if (rep.status != 0 || (rep.where == io::Where::kInFile) != (got >= 0)) {
    if (got >= 0) RawSyscall6(SYS_close, got);
    intercept::Logger().error("member '{}': the node agent could not fetch it ({})",
                              s.ns.path(s.ns.entry(entry)), std::strerror(rep.status ? -rep.status : EPROTO));
    return -EIO;
  }
  *fd = got;
  return 0;
}

}  // namespace

long FetchRemote(uint32_t entry, bool want_fd, RemoteSource* out) {
  State& s = *Get();
  if (s.agent.empty()) return -EIO;  // no agent: nothing can be remote
  const uint64_t len = s.ns.entry(entry).stored_size;
  const io::ArenaView* arena = want_fd ? nullptr : Arena(s);
  // A member the agent has just put in the arena can be evicted again before we look (a
  // node cache far smaller than what the node's processes read at once): after two such
  // misses, a private copy.
  for (int attempt = 0;; ++attempt) {
    const uint8_t* bytes = nullptr;
    if (arena) {
      if (const uint64_t w = arena->Find(entry, len, &bytes)) {
        *out = RemoteSource{bytes, w, -1};
        return 0;
      }
    }
    const bool copy = !arena || attempt >= 2;
    int fd = -1;
    if (const long rc = Ask(s, entry, copy ? io::LocalOp::kFetchCopy : io::LocalOp::kFetch, &fd); rc < 0)
      return rc;
    if (fd >= 0) {
      *out = RemoteSource{nullptr, 0, fd};
      return 0;
    }
    if (copy) return -EIO;  // (Ask checked that a copy comes with its descriptor)
  }
}

bool RemoteStill(uint32_t entry, uint64_t word) {
  const io::ArenaView* arena = Arena(*Get());
  return arena && arena->Still(entry, word);
}

}  // namespace fanstore::runtime
