// The preload library's constructor: the only code that runs by itself when the library is
// loaded. Built into preload libraries only (never into the core or the tests).
//   FANSTORE_INTERCEPT=0     leave libc unpatched (the library then does nothing)
//   FANSTORE_LOG_LEVEL=debug report the counts of sites found, patched and left, and why
//   FANSTORE_XSAVE=1         save the whole extended state with XSAVEC (slower; cpu_state.h)
#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "base/env_names.h"
#include "intercept/cpu_state.h"
#include "intercept/exec_env.h"
#include "intercept/patcher.h"
#include "intercept/preload_log.h"

namespace fanstore::intercept {
// Defined by the library's hook module (the runtime, or a test hook).
HookSpec PreloadHookSpec();
}  // namespace fanstore::intercept

extern char** environ;

namespace {

using namespace fanstore::intercept;

__attribute__((constructor)) void FanstorePreloadInit() {
  const char* on = std::getenv(fanstore::env::kIntercept);
  if (on && std::strcmp(on, "0") == 0) return;
  InitPreloadLog();
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&FanstorePreloadInit), &info) && info.dli_fname)
    CaptureExecEnv(info.dli_fname, environ);
  HookSpec spec = PreloadHookSpec();
  const char* xs = std::getenv(fanstore::env::kXsave);
  spec.full_xsave = xs && std::strcmp(xs, "1") == 0;
  auto stats = Install(spec);
  if (!stats.ok()) {
    Logger().error("interception disabled: {}", stats.status().message());
    return;
  }
  const PatchStats& s = *stats;
  if (!LogEnabled(spdlog::level::debug)) return;
  Logger().debug(
      "libc{}: {} syscall sites: {} patched ({} with moved instructions, {} with a run-time number "
      "check), {} left (not of "
      "interest), {} left (original frame), {} refused; plan {} in {:.2f} ms, total {:.2f} ms, "
      "{} stub bytes, vector state {} ({} bytes), clone mark {}, {} other thread(s) stopped ({} "
      "resumed in a stub)",
      s.libraries > 1 ? " and libpthread" : "", s.sites, s.patched, s.relocated,
      s.unknown_nr_patched, s.uninteresting, s.original_frame, s.refused,
      s.plan_cached ? "from the cache" : "decoded", s.decode_ms, s.total_ms, s.stub_bytes,
      VecModeName(), s.xsave_bytes, s.clone_mark ? "complete" : "incomplete (getpid checks)",
      s.threads_stopped, s.threads_moved);
  for (const auto& [why, n] : s.refusals) Logger().debug("refused {} site(s): {}", n, why);
}

}  // namespace
