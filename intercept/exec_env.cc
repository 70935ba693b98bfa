#include "intercept/exec_env.h"

#include <cstring>

#include "base/env_names.h"

namespace fanstore::intercept {
namespace {

constexpr size_t kArena = 16384;
constexpr size_t kMaxVars = 64;
char g_arena[kArena];
size_t g_used = 0;
const char* g_lib = nullptr;   // the preload library's path
const char* g_vars[kMaxVars];  // NAME=value, each a FANSTORE_ variable
size_t g_nvars = 0;
bool g_ok = false;

const char* Keep(const char* s) {
  const size_t n = std::strlen(s) + 1;
  if (g_used + n > kArena) return nullptr;
  char* p = g_arena + g_used;
  std::memcpy(p, s, n);
  g_used += n;
  return p;
}

size_t NameLen(const char* entry) {
  const char* eq = std::strchr(entry, '=');
  return eq ? static_cast<size_t>(eq - entry) : std::strlen(entry);
}

// True if the colon/space-separated list `list` names `lib`.
bool ListHas(const char* list, const char* lib) {
  const size_t n = std::strlen(lib);
  for (const char* p = list; *p;) {
    const size_t len = std::strcspn(p, ": ");
    if (len == n && std::strncmp(p, lib, n) == 0) return true;
    p += len;
    if (*p) ++p;
  }
  return false;
}

}  // namespace

bool CaptureExecEnv(const char* lib_path, char* const* environ) {
  g_used = 0;
  g_nvars = 0;
  g_ok = false;
  if (!lib_path || !(g_lib = Keep(lib_path))) return false;
  for (char* const* e = environ; e && *e; ++e) {
    if (std::strncmp(*e, env::kPrefix, sizeof env::kPrefix - 1) != 0) continue;
    if (env::Assigns(*e, env::kFds)) continue;  // one exec's own (runtime/calls/inherit.h)
    if (g_nvars == kMaxVars || !(g_vars[g_nvars] = Keep(*e))) return false;
    ++g_nvars;
  }
  g_ok = true;
  return true;
}

char* const* FixExecEnv(char* const* envp, char** out, size_t out_cap, char* scratch,
                        size_t scratch_cap) noexcept {
  if (!g_ok || !envp) return envp;
  size_t n = 0;
  const char* preload = nullptr;
  bool present[kMaxVars] = {};
  for (; envp[n]; ++n) {
    const char* e = envp[n];
    if (env::Assigns(e, env::kIntercept) && std::strcmp(e + sizeof env::kIntercept, "0") == 0)
      return envp;
    if (std::strncmp(e, "LD_PRELOAD=", 11) == 0) preload = e + 11;
    for (size_t v = 0; v < g_nvars; ++v) {
      const size_t len = NameLen(g_vars[v]);
      if (!present[v] && NameLen(e) == len && std::strncmp(e, g_vars[v], len) == 0)
        present[v] = true;
    }
  }
  const bool need_preload = !preload || !ListHas(preload, g_lib);
  size_t missing = 0;
  for (size_t v = 0; v < g_nvars; ++v) missing += !present[v];
  if (!need_preload && missing == 0) return envp;
  if (n + missing + 2 > out_cap) return envp;

  size_t k = 0;
  const char* new_preload = nullptr;
  if (need_preload) {
    const size_t lib = std::strlen(g_lib);
    const size_t old = preload ? std::strlen(preload) : 0;
    if (11 + lib + 1 + old + 1 > scratch_cap) return envp;
    std::memcpy(scratch, "LD_PRELOAD=", 11);
    std::memcpy(scratch + 11, g_lib, lib);
    size_t at = 11 + lib;
    if (old) {
      scratch[at++] = ':';
      std::memcpy(scratch + at, preload, old);
      at += old;
    }
    scratch[at] = '\0';
    new_preload = scratch;
  }
  for (size_t i = 0; i < n; ++i) {
    if (need_preload && std::strncmp(envp[i], "LD_PRELOAD=", 11) == 0) continue;
    out[k++] = envp[i];
  }
  if (new_preload) out[k++] = const_cast<char*>(new_preload);
  for (size_t v = 0; v < g_nvars; ++v)
    if (!present[v]) out[k++] = const_cast<char*>(g_vars[v]);
  out[k] = nullptr;
  return out;
}

}  // namespace fanstore::intercept
