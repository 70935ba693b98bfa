#include "runtime/process/env.h"

#include <cstdlib>
#include <cstring>

namespace fanstore::runtime::env {
namespace {

std::string Get(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string Absolute(const char* name) {
  std::string v = Get(name);
  return !v.empty() && v[0] == '/' ? v : "";
}

}  // namespace

Env ReadEnv() {
  Env e;
  e.image = Get(kImage);
  e.mount = Get(kMount);
  e.mount_real = Absolute(kMountReal);
  e.mount_aliases = Get(kMountAliases);
  e.data = Absolute(kData);
  e.verify_all = Get(kVerify) == "all";
  e.verify_none = Get(kVerify) == "none";
  e.stats = Get(kStats);
  if (const char* ra = std::getenv(kReadahead); ra && std::strcmp(ra, "auto") != 0)
    e.readahead = static_cast<int64_t>(std::strtoull(ra, nullptr, 10));
  if (const char* m = std::getenv(kMappedReads)) e.mapped_reads = std::strcmp(m, "0") != 0;
  e.agent = Get(kAgent);
  e.node_cache = Get(kNodeCache);
  if (const char* t = std::getenv(kAgentTimeout); t && std::atof(t) > 0)
    e.agent_timeout_ms = static_cast<int>(std::atof(t) * 1000);
  e.staged = Get(kStaged) == "1";
  e.staging_from = Absolute(kStagingFrom);
  e.served_mark = Absolute(kServedMark);
  const std::string map = Get(kPathMap);
  if (const size_t nl = map.find('\n');
      nl != std::string::npos && map[0] == '/' && map.compare(nl + 1, 1, "/") == 0) {
    e.map_from = map.substr(0, nl);
    e.map_to = map.substr(nl + 1);
  }
  return e;
}

}  // namespace fanstore::runtime::env
