// The kernel's page size: 4 KiB on x86-64; 4, 16 or 64 KiB on aarch64 (Grace nodes often
// run 64 KiB kernels). What mmap offsets, mprotect ranges and mincore's vector are in.
// Thread-safety: a function-local constant, initialised once.
#pragma once

#include <sys/auxv.h>

#include <cstdint>

namespace fanstore::base {

inline uint64_t PageSize() {
  static const uint64_t page = getauxval(AT_PAGESZ) ? getauxval(AT_PAGESZ) : 4096;
  return page;
}

}  // namespace fanstore::base
