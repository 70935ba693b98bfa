// Raw deflate decoding with ISA-L's igzip, whole-buffer or streaming.
// Thread-safety: an Inflater is used by one thread at a time. InflateExact is reentrant.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace fanstore::compress {

// Inflates `in` into `out`, which must be exactly the uncompressed size.
// Returns 0; -EBADMSG if the stream is damaged, or if it ends before filling `out` or
// holds more than `out.size()` bytes. Never writes outside `out`.
int InflateExact(std::span<const uint8_t> in, std::span<uint8_t> out) noexcept;

// Streaming decoder for members too large to hold whole.
class Inflater {
 public:
  Inflater();
  ~Inflater();
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;

  void Reset() noexcept;
  // Feeds `in` (may be empty) and fills up to out.size() bytes; `*produced` says how many.
  // Returns 0 while more may come, 1 once the stream's final block ended, -EBADMSG on damage.
  // Call again with the same unconsumed input (see consumed()) while out fills up.
  int Step(std::span<const uint8_t> in, std::span<uint8_t> out, size_t* consumed,
           size_t* produced) noexcept;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace fanstore::compress
