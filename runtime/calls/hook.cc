// The runtime's hook: the one function the interception layer calls for every wanted
// system call, routing it to its handler. Also the library's start-up (PreloadHookSpec)
// and its statistics at exit (FANSTORE_STATS).
#include <fcntl.h>
#include <linux/capability.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/raw_syscall.h"
#include "intercept/hook_api.h"
#include "intercept/preload_log.h"
#include "runtime/calls/handlers.h"
#include "runtime/calls/inherit.h"
#include "runtime/calls/served_calls.h"
#include "runtime/data/member_io.h"
#include "runtime/data/verified.h"
#include "runtime/paths/skeleton.h"
#include "runtime/process/counter.h"
#include "runtime/process/fd_table.h"
#include "runtime/process/prefilter_state.h"
#include "runtime/process/state.h"

namespace fanstore::runtime {
intercept::HookResult RuntimeHook(long nr, const long a[6]) noexcept;
void WriteStats();
namespace {

ShardedCounter s_opens, s_stats, s_calls, s_failed;

// Every system call the runtime serves, in one table: its handler, and whether that
// handler allocates, locks or changes shared tables, so that it must not run in a vfork
// child, which shares its parent's memory (State::InVforkChild). The others (stat, lseek,
// fstat, access, readlink...) touch nothing shared on their way, and exec takes care of
// itself. The table is runtime/names/call_table.h's list; the unserved calls share one
// route; the interception interest is ServedInterest(), both lists' numbers.
using Handler = HookResult (*)(long nr, const long a[6]);
struct Served {
  long nr;
  Handler fn;
  bool not_in_vfork_child;
};

HookResult OpenCounted(long nr, const long a[6]) {
  s_opens.Add(1);
  return OnOpenat(nr, a);
}
HookResult StatPathCounted(long nr, const long a[6]) {
  s_stats.Add(1);
  return OnStatPath(nr, a);
}
HookResult StatxCounted(long, const long a[6]) {
  s_stats.Add(1);
  return OnStatx(a);
}
HookResult FstatCounted(long, const long a[6]) {
  s_stats.Add(1);
  return OnFstat(a);
}
HookResult ExitGroup(long, const long[6]) {  // every way out (exit, _exit, os._exit) ends here
  WriteStats();
  if (!Get()->InVforkChild()) Fds().ReleaseAll();
  return kPassToKernel;
}
template <HookResult (*F)(const long[6])>
HookResult ArgsOnly(long, const long a[6]) {
  return F(a);
}

constexpr bool kShared = true, kSafe = false;
constexpr Served kServed[] = {
#define FANSTORE_SERVED_ROW(nr, handler, rule, fds, paths, flags) {nr, handler, rule},
    FANSTORE_SERVED_CALLS(FANSTORE_SERVED_ROW)
#undef FANSTORE_SERVED_ROW
};
// Every call of unserved_calls.h (resolving its paths may allocate: not in a vfork child).
constexpr Served kUnservedRoute{-1, OnUnserved, kShared};
constexpr bool ServedAndUnservedAreApart() {
  for (const Served& r : kServed)
    for (const UnservedCall& c : kUnservedCalls)
      if (r.nr == c.nr) return false;
  return true;
}
static_assert(ServedAndUnservedAreApart(), "a call is either served or refused, not both");

// kServed by number, filled once at start-up (single-threaded), read-only afterwards.
const Served* g_routes[intercept::kMaxSyscallNr];

// A call runtime/paths/skeleton.h covers that its handler passed on: served from the dataset
// under its physical path when it is below a spelling learned before; otherwise made
// here, and served again so when the kernel's answer came from the mount point's skeleton
// (ENOENT below one of its directories, or one of them opened).
HookResult ThroughSkeleton(const Served& r, long nr, const long a[6]) {
  char physical[4096];
  const int at = SkeletonPathArg(nr);
  long b[6] = {a[0], a[1], a[2], a[3], a[4], a[5]};
  if (at == 1) b[0] = AT_FDCWD;
  b[at] = reinterpret_cast<long>(physical);
  const char* path = reinterpret_cast<const char*>(a[at]);
  if (path &&
      LearnedPathAt(at == 1 ? static_cast<int>(a[0]) : AT_FDCWD, path, physical, sizeof physical)) {
    const HookResult out = r.fn(nr, b);
    if (out.handled) return out;
  }
  const long k = base::RawSyscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
  if (!SkeletonPath(nr, a, k, physical, sizeof physical)) return intercept::Handled(k);
  const HookResult out = r.fn(nr, b);
  if (!out.handled) return intercept::Handled(k);  // (the kernel's after all: its answer)
  if (k >= 0) base::RawSyscall6(SYS_close, k);     // the skeleton's directory
  return out;
}

// Whether this process may read a directory whatever its mode (fanrun's skeleton is
// 0111): root, or the effective CAP_DAC_OVERRIDE or CAP_DAC_READ_SEARCH. A process that
// drops them later keeps the answer: it then checks more than it needs to, never less.
bool MayReadAnyDirectory() {
  if (base::RawSyscall6(SYS_geteuid) == 0) return true;
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (base::RawSyscall6(SYS_capget, reinterpret_cast<long>(&header),
                        reinterpret_cast<long>(data)) != 0)
    return true;
  return (data[0].effective & ((1u << CAP_DAC_OVERRIDE) | (1u << CAP_DAC_READ_SEARCH))) != 0;
}

// Whether a call names a parked fd (runtime/process/fd_table.h), closed to the application: it
// fails with EBADF as on any closed fd. (close, fcntl, dup2/dup3 and close_range: their
// handlers; poll and select pass it to the kernel, which reports it as a closed fd.)
bool OnParkedFd(long nr, const long a[6]) {
  const CallRow& r = RowOf(nr);
  if (r.flags & (kOwnFdCheck | kUnserved)) return false;
  if ((r.flags & kMapFile) && (a[3] & MAP_ANONYMOUS)) return false;
  const FdTable& t = Fds();
  for (unsigned m = r.fds, i = 0; m; m >>= 1, ++i)
    if ((m & 1) && t.IsParked(a[i])) return true;
  if (r.flags & kEmptyPathFd) {
    const Args args(nr, a);
    const char* path = args.path();
    return path && !path[0] && t.IsParked(args.dirfd());
  }
  return false;
}

}  // namespace

intercept::HookResult RuntimeHook(long nr, const long a[6]) noexcept {
  State* s = Get();
  if (!s || nr < 0 || nr >= intercept::kMaxSyscallNr || !g_routes[nr]) return kPassToKernel;
  const Served& r = *g_routes[nr];
  if (r.not_in_vfork_child && s->InVforkChild()) return kPassToKernel;
  s_calls.Add(1);
  if (Fds().AnyParked() && OnParkedFd(nr, a)) return intercept::Handled(-EBADF);
  HookResult out = r.fn(nr, a);
  if (!out.handled && SkeletonPathArg(nr) >= 0 && g_prefilter.skeleton_dev != 0)
    out = ThroughSkeleton(r, nr, a);
  if (out.handled && out.value < 0) s_failed.Add(1);
  return out;
}

void WriteStats() {
  State* s = Get();
  if (!s || s->stats_target.empty() || s->InVforkChild()) return;
  const IoStats io = SnapshotIoStats();
  char line[1024];
  std::snprintf(
      line, sizeof line,
      "{\"pid\": %d, \"calls\": %llu, \"opens\": %llu, \"stats\": %llu, \"reads\": %llu, "
      "\"bytes\": %llu, \"cache_hits\": %llu, \"inflates\": %llu, \"inflate_ms\": %.3f, "
      "\"error_replies\": %llu, \"damaged\": %llu, \"remote\": %llu, \"device_reads\": %llu, "
      "\"mapped_reads\": %llu, \"trusted_reads\": %llu, \"node_cache_hits\": %llu, "
      "\"raw_checks\": %llu, \"landed_reads\": %llu, \"landing_waits\": %llu, "
      "\"landing_gave_up\": %llu, \"realigned\": %llu, \"checks_shared\": %s}\n",
      static_cast<int>(::getpid()), static_cast<unsigned long long>(s_calls.Load()),
      static_cast<unsigned long long>(s_opens.Load()),
      static_cast<unsigned long long>(s_stats.Load() + g_prefilter.answered_stats.Load()),
      static_cast<unsigned long long>(io.reads), static_cast<unsigned long long>(io.bytes),
      static_cast<unsigned long long>(io.cache_hits), static_cast<unsigned long long>(io.inflates),
      io.inflate_ns / 1e6, static_cast<unsigned long long>(s_failed.Load()),
      static_cast<unsigned long long>(io.errors), static_cast<unsigned long long>(io.remote),
      static_cast<unsigned long long>(io.device_reads),
      static_cast<unsigned long long>(io.mapped_reads),
      static_cast<unsigned long long>(io.trusted_reads),
      static_cast<unsigned long long>(io.node_cache_hits),
      static_cast<unsigned long long>(io.raw_checks),
      static_cast<unsigned long long>(io.landed_reads),
      static_cast<unsigned long long>(io.landing_waits),
      static_cast<unsigned long long>(io.landing_gave_up),
      static_cast<unsigned long long>(io.realigned), VerifiedShared() ? "true" : "false");
  if (s->stats_target == "1") {
    const int fd = s->stats_fd >= 0 ? s->stats_fd : 2;
    base::RawSyscall6(SYS_write, fd, reinterpret_cast<long>(line),
                      static_cast<long>(std::strlen(line)));
  } else if (FILE* f = std::fopen(s->stats_target.c_str(), "a")) {
    std::fputs(line, f);
    std::fclose(f);
  }
}

}  // namespace fanstore::runtime

namespace fanstore::intercept {

HookSpec PreloadHookSpec() {
  using namespace fanstore::runtime;
  HookSpec spec;
  if (Status st = Init(); !st.ok()) {
    std::fprintf(stderr, "fanstore: runtime start-up failed: %s\n", st.message().c_str());
    _exit(121);
  }
  State* s = Get();
  if (!s) return spec;  // no dataset configured: nothing to serve
  // The data side's per-process start: the node's marks of checked members, and what a
  // forked child forgets (registered after State's own fork handler, so it runs after it).
  AttachVerified(VerifiedPathBeside(s->image_path), s->ns);
  pthread_atfork(nullptr, nullptr, MemberIoAfterFork);
  Fds();
  AdoptInherited();
  AdoptInheritedCwd();
  {
    static_assert(kSpellings == kMountSpellings);
    const auto spellings = s->spellings();
    for (size_t k = 0; k < spellings.size(); ++k) {
      auto& to = g_prefilter.spellings[k];
      char* text = g_prefilter.spelling_text[k];
      to.len = static_cast<unsigned>(
          std::min<size_t>(spellings[k].size(), sizeof g_prefilter.spelling_text[k] - 1));
      std::memcpy(text, spellings[k].data(), to.len);
      to.path = text;
      g_prefilter.head_lens[k] = static_cast<uint8_t>(std::min<size_t>(to.len, 8));
      std::memcpy(g_prefilter.heads[k], text, g_prefilter.head_lens[k]);
      AddMountNames(text, to.len);
      const size_t first_alias = spellings.first_alias;
      to.link = k >= first_alias && (s->alias_links >> (k - first_alias) & 1);
      to.inside = k >= first_alias && s->alias_entries[k - first_alias] != 0;
    }
  }
  g_prefilter.physical = s->mount_real.empty() ? 0 : 1;
  {
    // fanrun made the mount point's directories (its skeleton) before CMD started.
    struct stat st;
    if (base::RawSyscall6(SYS_newfstatat, AT_FDCWD,
                          reinterpret_cast<long>(s->physical_mount().c_str()),
                          reinterpret_cast<long>(&st), 0) == 0 &&
        S_ISDIR(st.st_mode)) {
      g_prefilter.skeleton_dev = st.st_dev;
      g_prefilter.skeleton_marked = st.st_mtim.tv_nsec == kSkeletonMarkNs;
      g_prefilter.skeleton_readable = MayReadAnyDirectory();
    }
  }
  g_prefilter.reserved_lo = s->reserved_lo;
  g_prefilter.fd_bits = Fds().bits();
  g_prefilter.fd_count = Fds().bound();
  g_prefilter.fd_map = Fds().fd_map();
  g_prefilter.descs = Fds().slab();
  g_prefilter.image = s->tables();
  g_prefilter.active = true;
  spec.hook = &RuntimeHook;
  spec.prefilter = &RuntimePrefilter;
  spec.prefilter_again = &RuntimePrefilterAgain;
  // (A negative number is a call this architecture lacks: base/syscall_numbers.h.)
  for (const Served& r : kServed)
    if (r.nr >= 0) g_routes[r.nr] = &r;
  for (const UnservedCall& c : kUnservedCalls)
    if (c.nr >= 0) g_routes[c.nr] = &kUnservedRoute;
  spec.interest = ServedInterest();
  return spec;
}

}  // namespace fanstore::intercept
