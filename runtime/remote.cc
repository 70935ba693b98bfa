#include "runtime/remote.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "intercept/preload_log.h"
#include "intercept/raw_syscall.h"
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
thread_local io::TouchBatch t_touch{io::LocalOp::kTouch, 0, {}};  // node-cache hits not yet told

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

}  // namespace

long FetchRemote(uint32_t entry) {
  State& s = *Get();
  if (s.agent.empty()) return -EIO;  // no agent: nothing can be remote
  const pid_t me = s.pid.load(std::memory_order_relaxed);
  if (t_conn.owner != me) {  // a forked child: the inherited connection is the parent's
    if (t_conn.fd >= 0) RawSyscall6(SYS_close, t_conn.fd);
    t_conn.fd = -1;
    t_touch.count = 0;
    t_conn.owner = me;
  }
  if (t_conn.fd < 0) {
    const long fd = Connect(s);
    if (fd < 0) {
      intercept::Logger().error("node agent {}: cannot connect ({})", s.agent, std::strerror(static_cast<int>(-fd)));
      return -EIO;
    }
    t_conn.fd = static_cast<int>(fd);
  }
  // Fetched before: the node cache holds it. Open it directly and tell the agent, without
  // waiting, that it was used (its LRU order). An eviction racing with this open is harmless:
  // ENOENT sends us to the agent, and an opened file outlives its unlink.
  if (!s.node_cache.empty()) {
    char path[4096];
    const int len = std::snprintf(path, sizeof path, "%s/%u", s.node_cache.c_str(), entry);
    if (len > 0 && len < static_cast<int>(sizeof path)) {
      const long fd = RawSyscall6(SYS_openat, AT_FDCWD, reinterpret_cast<long>(path),
                                  O_RDONLY | O_CLOEXEC);
      if (fd >= 0) {
        io::TouchBatch& b = t_touch;
        b.op = io::LocalOp::kTouch;
        b.entries[b.count++] = entry;
        if (b.count == io::kTouchBatch) {
          RawSyscall6(SYS_sendto, t_conn.fd, reinterpret_cast<long>(&b), sizeof b,
                      MSG_NOSIGNAL | MSG_DONTWAIT, 0, 0);
          b.count = 0;
        }
        return fd;
      }
    }
  }
  io::LocalRequest req{io::LocalOp::kFetch, entry};
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
  int fd = -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
  if (rep.status != 0) {
    if (fd >= 0) RawSyscall6(SYS_close, fd);
    intercept::Logger().error("member '{}': the node agent could not fetch it ({})",
                              s.ns.path(s.ns.entry(entry)), std::strerror(-rep.status));
    return -EIO;
  }
  return fd >= 0 ? fd : -EIO;
}

}  // namespace fanstore::runtime
