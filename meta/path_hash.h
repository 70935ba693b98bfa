// The 64-bit hash of a path used by the namespace image's table. Inline and written with
// plain integer operations (no memcpy of a variable size, no vector code), so the image
// builder, the readers and the runtime's prefilter (compiled -mgeneral-regs-only) all
// compute the same value.
// Thread-safety: pure function.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fanstore::meta {

inline uint64_t HashPath(const char* s, size_t n) noexcept {
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  uint64_t h = 0x243F6A8885A308D3ull ^ (n * kMul);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;  // little-endian: byte i is the lowest
    __builtin_memcpy(&w, s + i, 8);
    h = (h ^ w) * kMul;
    h ^= h >> 29;
  }
  uint64_t tail = 0;
  for (size_t k = n - i; k > 0; --k) tail = (tail << 8) | static_cast<uint8_t>(s[i + k - 1]);
  h = (h ^ tail) * kMul;
  h ^= h >> 32;
  return h * 0xD6E8FEB86659FD93ull;
}

}  // namespace fanstore::meta
