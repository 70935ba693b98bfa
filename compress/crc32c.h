// CRC32C (Castagnoli), the checksum of every member's uncompressed bytes and of the
// partition index. Computed by ISA-L's crc32_iscsi (SSE4.2/PCLMUL where the CPU has it).
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fanstore::compress {

// Extends `crc` (the value returned by a previous call, or 0 to start) over `len` bytes.
// Standard CRC32C: Crc32c(0, "123456789", 9) == 0xE3069283. Any length, including > 2 GiB.
uint32_t Crc32c(uint32_t crc, const void* data, size_t len) noexcept;

}  // namespace fanstore::compress
