// LibcImage: where the loaded libc's executable code is, and the function entry points its
// .dynsym exports (indirect-call targets the planner must not patch across).
// Thread-safety: Locate() reads loader state; call it from the constructor.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace fanstore::intercept {

struct LibcImage {
  std::string path;         // as the loader names it
  uint64_t load_base = 0;   // dlpi_addr
  uint64_t text_start = 0;  // the executable PT_LOAD, live addresses
  uint64_t text_end = 0;
  std::string build_id;                    // hex of NT_GNU_BUILD_ID ("" if the file has none)
  std::vector<uint64_t> function_entries;  // filled by ReadFunctionEntries()
  // The executable sections (.init, .plt, .text, .fini), live addresses, also filled by
  // ReadFunctionEntries(): on aarch64 the executable segment holds read-only data too
  // (no -z separate-code), which must not be read as instructions. Empty: all of it.
  std::vector<std::pair<uint64_t, uint64_t>> code_ranges;

  // Finds the loaded library of that soname, libc by default (cheap: loader data only).
  // The patcher also locates libpthread.so.0, which before glibc 2.34 has system-call
  // wrappers of its own (patcher.h).
  static Result<LibcImage> Locate(const char* soname = "libc.so.6");
  // Adds the live addresses of the functions libc's .dynsym exports, and its executable
  // sections (reads the file).
  void ReadFunctionEntries();
};

// The hex GNU build-id among ELF notes (a PT_NOTE segment's bytes), "" if none.
std::string BuildIdOfNotes(const uint8_t* notes, size_t size);

}  // namespace fanstore::intercept
