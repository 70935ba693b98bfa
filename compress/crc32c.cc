#include "compress/crc32c.h"

#include <isa-l/crc.h>

#include <climits>

namespace fanstore::compress {

uint32_t Crc32c(uint32_t crc, const void* data, size_t len) noexcept {
  // ISA-L takes an int length and works on the inverted register: invert in and out so the
  // value composes across calls like zlib's crc32().
  auto* p = static_cast<unsigned char*>(const_cast<void*>(data));
  uint32_t reg = ~crc;
  while (len > 0) {
    const size_t n = len > (1u << 30) ? (1u << 30) : len;
    reg = crc32_iscsi(p, static_cast<int>(n), reg);
    p += n;
    len -= n;
  }
  return ~reg;
}

}  // namespace fanstore::compress
