// LibcImage: where the loaded libc's executable code is, and the function entry points its
// .dynsym exports (indirect-call targets the planner must not patch across).
// Thread-safety: Locate() reads loader state; call it from the constructor.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "meta/status.h"

namespace fanstore::intercept {

struct LibcImage {
  std::string path;          // as the loader names it
  uint64_t load_base = 0;    // dlpi_addr
  uint64_t text_start = 0;   // the executable PT_LOAD, live addresses
  uint64_t text_end = 0;
  std::vector<uint64_t> function_entries;  // live addresses of exported functions

  static Result<LibcImage> Locate();
};

}  // namespace fanstore::intercept
