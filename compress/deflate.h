// Raw deflate (RFC 1951, no wrapper) with ISA-L's igzip, levels 0..3.
// Thread-safety: a Deflater is used by one thread at a time; make one per thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace fanstore::compress {

inline constexpr int kMinLevel = 0;
inline constexpr int kMaxLevel = 3;

class Deflater {
 public:
  // `level` must be in [kMinLevel, kMaxLevel]; the level buffer is allocated once here.
  explicit Deflater(int level);
  ~Deflater();
  Deflater(const Deflater&) = delete;
  Deflater& operator=(const Deflater&) = delete;

  int level() const { return level_; }

  // One shot: compresses `in` (at most 4 GiB - 1) into `out` (resized to the stream's size).
  // Returns 0, or -EINVAL for an input too large for one shot. (Large members are cut into
  // 1 MiB blocks, each its own stream, meta/blocks.h: nothing deflates in pieces.)
  int Compress(std::span<const uint8_t> in, std::vector<uint8_t>& out);

 private:
  struct State;
  int level_;
  std::unique_ptr<State> state_;
};

}  // namespace fanstore::compress
