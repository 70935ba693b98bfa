// The FANSTORE_* variables the runtime reads, read once at start into Env (their names and
// meanings: base/env_names.h).
// Thread-safety: ReadEnv reads the environment; call it before any thread is started.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/env_names.h"

namespace fanstore::runtime::env {

// The names live with every other part's in base/env_names.h.
using namespace ::fanstore::env;

// The values the runtime starts with (the inherited kFds and kCwd are read by inherit.cc).
struct Env {
  std::string image;                 // "" = not under fanrun
  std::string mount;                 // as given (checked by State's Init)
  std::string mount_real;            // "" unless absolute
  std::string mount_aliases;         // the raw list
  std::string data;                  // "" unless absolute
  bool verify_all = false;           // FANSTORE_VERIFY=all
  bool verify_none = false;          // FANSTORE_VERIFY=none
  std::string stats;                 // "" | "1" | path
  std::optional<int64_t> readahead;  // unset: auto
  std::optional<bool> mapped_reads;  // unset: the runtime's default
  std::string agent;                 // "" = none
  std::string node_cache;
  std::optional<int> agent_timeout_ms;  // unset (or not a positive number): the default
  bool staged = false;
  std::string staging_from;      // "" unless absolute
  std::string served_mark;       // "" unless absolute
  std::string map_from, map_to;  // FANSTORE_PATH_MAP ("" unless both absolute)
};

Env ReadEnv();

}  // namespace fanstore::runtime::env
