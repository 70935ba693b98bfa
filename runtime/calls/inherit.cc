#include "runtime/calls/inherit.h"

#include <fcntl.h>
#include <linux/kcmp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "base/raw_syscall.h"
#include "runtime/paths/resolve.h"
#include "runtime/process/env.h"
#include "runtime/process/fd_table.h"
#include "runtime/process/state.h"

namespace fanstore::runtime {
namespace {

using base::RawSyscall6;

// "NAME=" of a variable, for writing and matching environment entries.
template <size_t N>
constexpr std::array<char, N + 1> Assignment(const char (&name)[N]) {
  std::array<char, N + 1> a{};
  for (size_t i = 0; i + 1 < N; ++i) a[i] = name[i];
  a[N - 1] = '=';
  return a;
}
constexpr auto kFdsAssign = Assignment(env::kFds);
constexpr auto kCwdAssign = Assignment(env::kCwd);
constexpr const char* kVar = kFdsAssign.data();
constexpr size_t kVarLen = kFdsAssign.size() - 1;
constexpr const char* kCwdVar = kCwdAssign.data();
constexpr size_t kCwdVarLen = kCwdAssign.size() - 1;
static_assert(env::Assigns(kFdsAssign.data(), env::kFds) && kFdsAssign[kVarLen] == 0);

// Appends text and numbers to a fixed buffer; remembers running out of room.
struct Writer {
  char* buf;
  size_t cap;
  size_t len = 0;
  bool full = false;
  void Put(char c) {
    if (len + 1 < cap) {
      buf[len++] = c;
    } else {
      full = true;
    }
  }
  void Put(const char* s) {
    while (*s) Put(*s++);
  }
  void PutNum(uint64_t v) {
    char digits[24];
    int n = 0;
    do {
      digits[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v > 0 && n < 24);
    while (n > 0) Put(digits[--n]);
  }
  size_t room() const { return cap - len; }
  void Finish() { buf[len < cap ? len : cap - 1] = '\0'; }
};

bool IsPlaceholder(int fd) {
  const long fl = RawSyscall6(SYS_fcntl, fd, F_GETFL);
  return fl >= 0 && (fl & O_PATH);
}

bool SurvivesExec(int fd) {
  const long fl = RawSyscall6(SYS_fcntl, fd, F_GETFD);
  return fl >= 0 && !(fl & FD_CLOEXEC);
}

}  // namespace

void AdoptInherited() {
  const char* v = std::getenv(env::kFds);
  if (!v) return;
  FdTable& t = Fds();
  State* s = Get();
  const char* p = std::strchr(v, ' ');
  while (t.inherited() && s && p && *p) {
    while (*p == ' ') ++p;
    const char kind = *p;
    if (kind != 'k' && kind != 'a' && kind != 'r') break;
    char* end;
    const long first = std::strtol(p + 1, &end, 10);
    if (end == p + 1) break;
    p = end;
    if (kind == 'r') {
      t.ReleaseDesc(static_cast<int>(first));
      continue;
    }
    if (*p != '.') break;
    const long d = std::strtol(p + 1, &end, 10);
    if (end == p + 1) break;
    p = end;
    const int fd = static_cast<int>(first);
    if (first < 0 || first >= kMaxFds || s->IsReservedFd(fd) || !t.ValidDesc(static_cast<int>(d)) ||
        t.desc(static_cast<int>(d)).entry >= s->ns.size() || !IsPlaceholder(fd))
      continue;
    t.Adopt(fd, static_cast<int>(d), kind == 'a');
  }
  ::unsetenv(env::kFds);
}

void AdoptInheritedCwd() {
  const char* v = std::getenv(env::kCwd);
  if (!v) return;
  char* end;
  const unsigned long long entry = std::strtoull(v, &end, 10);
  const bool e_ok = end != v && *end == '.';
  const char* p = end + 1;
  const unsigned long long dev = e_ok ? std::strtoull(p, &end, 10) : 0;
  const bool d_ok = e_ok && end != p && *end == '.';
  p = end + 1;
  const unsigned long long ino = d_ok ? std::strtoull(p, &end, 10) : 0;
  if (d_ok && end != p && *end == '\0' && entry < (1ULL << 32))
    AdoptCwd(static_cast<uint32_t>(entry), dev, ino);
  ::unsetenv(env::kCwd);
}

bool EncodeCwdForExec(char* buf, size_t cap) {
  uint32_t entry;
  uint64_t dev, ino;
  if (cap < 80 || !CwdForExec(&entry, &dev, &ino)) return false;
  Writer w{buf, cap};
  w.Put(kCwdVar);
  w.PutNum(entry);
  w.Put('.');
  w.PutNum(dev);
  w.Put('.');
  w.PutNum(ino);
  w.Finish();
  return !w.full;
}

bool EncodeForExec(char* buf, size_t cap, bool vfork_child) {
  FdTable& t = Fds();
  if (t.slab_fd() < 0 || cap < 64) return false;
  Writer w{buf, cap};
  w.Put(kVar);
  w.PutNum(static_cast<uint64_t>(t.slab_fd()));
  int passed = 0;
  auto pass = [&](char kind, int fd, int d) {
    w.Put(' ');
    w.Put(kind);
    w.PutNum(static_cast<uint64_t>(fd));
    w.Put('.');
    w.PutNum(static_cast<uint64_t>(d));
    ++passed;
  };
  if (!vfork_child) {
    // The tables are this process's own and exact.
    t.ForEach([&](int fd, int d) {
      if (SurvivesExec(fd)) pass('k', fd, d);
    });
    // Descriptions whose fds exec closes; dropping them is only bookkeeping, so they are
    // left out (leaked) when the buffer runs short.
    t.ForEach([&](int fd, int d) {
      if (passed == 0 || w.full || w.room() < 16 || SurvivesExec(fd)) return;
      w.Put(" r");
      w.PutNum(static_cast<uint64_t>(d));
    });
  } else {
    const long self = RawSyscall6(SYS_getpid);
    const long parent = RawSyscall6(SYS_getppid);
    // 1 equal, 0 not, -1 cannot tell (no kcmp)
    auto same = [&](int child_fd, int parent_fd) {
      const long r = RawSyscall6(SYS_kcmp, self, parent, KCMP_FILE, child_fd, parent_fd);
      return r == 0 ? 1 : (r > 0 || r == -EBADF) ? 0 : -1;
    };
    t.ForEach([&](int fd, int d) {
      if (SurvivesExec(fd) && IsPlaceholder(fd) && same(fd, fd) != 0) pass('a', fd, d);
    });
    for (int fd = 0; fd < 3; ++fd) {  // dup2(virtual, 0..2) in the child: a redirection
      if ((t.DescOf(fd) >= 0 && same(fd, fd) != 0) || !SurvivesExec(fd) || !IsPlaceholder(fd))
        continue;
      int found = -1;
      t.ForEach([&](int pfd, int d) {
        if (found < 0 && same(fd, pfd) == 1) found = d;
      });
      if (found >= 0) pass('a', fd, found);
    }
  }
  w.Finish();
  return passed > 0 && !w.full;
}

char* const* WithInheritVars(char* const* env, char** out, size_t cap, const char* fds_var,
                             const char* cwd_var) {
  if (!env) return env;
  auto ours = [](const char* e) {
    return std::strncmp(e, kVar, kVarLen) == 0 || std::strncmp(e, kCwdVar, kCwdVarLen) == 0;
  };
  size_t n = 0;
  bool present = false;
  for (; env[n]; ++n) present |= ours(env[n]);
  if (!fds_var && !cwd_var && !present) return env;
  if (n + 3 > cap) return env;
  size_t k = 0;
  for (size_t i = 0; i < n; ++i)  // in place when env == out: k never passes i
    if (!ours(env[i])) out[k++] = env[i];
  if (fds_var) out[k++] = const_cast<char*>(fds_var);
  if (cwd_var) out[k++] = const_cast<char*>(cwd_var);
  out[k] = nullptr;
  return out;
}

long ExecPassingFds(long nr, const long b[6], bool passing) {
  const int slab = Fds().slab_fd();
  if (passing) RawSyscall6(SYS_fcntl, slab, F_SETFD, 0);
  const long rc = RawSyscall6(nr, b[0], b[1], b[2], b[3], b[4], b[5]);
  if (passing) RawSyscall6(SYS_fcntl, slab, F_SETFD, FD_CLOEXEC);  // the exec failed
  return rc;
}

}  // namespace fanstore::runtime
