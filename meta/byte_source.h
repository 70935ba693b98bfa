// ByteSource: a forward-only stream of bytes read once, front to back: an archive file, a
// decompressed view of one (gzip through ISA-L, zstd, xz), or one member of an archive
// being read (a tar inside a tar). The archive readers (meta/archive_reader.h) sit on top.
// Errors name the archive and a byte offset in it, so a damaged download can be located.
// Thread-safety: one thread per source.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"

namespace fanstore::meta {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Reads up to n bytes; 0 only at the end of the stream.
  virtual Result<size_t> Read(uint8_t* p, size_t n) = 0;
  // Bytes of the underlying file consumed so far (for progress and error offsets).
  virtual uint64_t file_offset() const = 0;
  // The archive's name as errors show it.
  virtual const std::string& name() const = 0;
  // Bytes the stream can still give when that is known (a plain file: its size less what
  // was read), else UINT64_MAX (a decoder's output, a pipe). Lets a reader refuse a
  // declared size the input cannot hold before anything of it is written.
  virtual uint64_t bytes_left() const { return UINT64_MAX; }

  // Reads exactly n bytes; `what` names the thing read for the "ends early" error.
  Status ReadFull(uint8_t* p, size_t n, const char* what);
  // Reads and drops n bytes.
  Status Skip(uint64_t n, const char* what);
};

// The container compression of an archive file, recognised by its first bytes.
enum class Compression { kNone, kGzip, kZstd, kXz, kBzip2 };
Compression DetectCompression(const uint8_t* p, size_t n);
const char* CompressionName(Compression c);

// A file opened read-only (the fd is owned). `name` is what errors show.
Result<std::unique_ptr<ByteSource>> OpenFileSource(const std::string& path);
// Wraps `in` in the decoder for `c` (kNone returns it unchanged). bzip2 is refused with a
// clear error.
Result<std::unique_ptr<ByteSource>> Decompressed(std::unique_ptr<ByteSource> in, Compression c);

// Peeks at the first bytes of `in` and returns it decompressed as they say.
Result<std::unique_ptr<ByteSource>> AutoDecompressed(std::unique_ptr<ByteSource> in);

}  // namespace fanstore::meta
