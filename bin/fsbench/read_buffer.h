// The read buffer of fsbench's workers: `size` bytes starting `offset` bytes past a page
// boundary (--buffer-offset, options.h: where a buffer sits decides how fast the kernel copies
// file data into it on x86-64).
// Thread-safety: one per worker thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace fanstore::fsbench {

class ReadBuffer {
 public:
  ReadBuffer(uint64_t size, uint64_t offset)
      : mem_(static_cast<size_t>(size + offset) + kPage), size_(static_cast<size_t>(size)) {
    const auto base = reinterpret_cast<uintptr_t>(mem_.data());
    at_ = mem_.data() + (kPage - base % kPage) % kPage + offset;
  }
  ReadBuffer(const ReadBuffer&) = delete;  // (data() points into mem_)
  ReadBuffer& operator=(const ReadBuffer&) = delete;
  char* data() { return at_; }
  size_t size() const { return size_; }

 private:
  static constexpr uint64_t kPage = 4096;
  std::vector<char> mem_;
  char* at_;
  size_t size_;
};

}  // namespace fanstore::fsbench
