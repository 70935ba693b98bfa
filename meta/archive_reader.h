// Archive readers for the packer: the entries of a tar (POSIX ustar, GNU and PAX: long
// names and links, base-256 sizes, sparse members expanded, global and per-member PAX
// attributes) read front to back from a ByteSource, or of a zip (stored and deflated
// members, zip64, Unix modes and timestamps) read through its central directory. Entries
// come in archive order with their data; paths are returned as the archive names them
// (the packer checks and normalises them). Damage is reported as one line naming the
// archive and the byte offset.
// Thread-safety: one thread per reader.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "meta/byte_source.h"

namespace fanstore::meta {

struct ArchiveEntry {
  enum Type { kFile, kDir, kSymlink, kHardlink, kSpecial } type = kFile;
  std::string path;   // as the archive names it
  std::string link;   // symlink target, or the path a hard link names
  uint32_t mode = 0;  // permission bits (07777)
  uint32_t uid = 0, gid = 0;
  int64_t mtime_ns = 0;
  uint64_t size = 0;      // bytes ReadData will give (a sparse member's full size)
  uint64_t offset = 0;    // where its header starts in the (decompressed) archive
  bool has_owner = true;  // false when the format records none (zip)
};

class EntryReader {
 public:
  virtual ~EntryReader() = default;
  // The next entry; false at the end of the archive. Skips what is left of the current one.
  virtual Result<bool> Next(ArchiveEntry* e) = 0;
  // The current entry's data; 0 at its end.
  virtual Result<size_t> ReadData(uint8_t* p, size_t n) = 0;
  // Bytes of the archive file read so far (progress).
  virtual uint64_t file_offset() const = 0;
  virtual const std::string& name() const = 0;
};

// A tar read from `in` (already decompressed).
std::unique_ptr<EntryReader> NewTarReader(std::unique_ptr<ByteSource> in);

// A ByteSource over the current entry of `outer` (which must outlive it and not move on
// while it is read), named "OUTER:PATH": a tar inside a tar.
std::unique_ptr<ByteSource> EntryDataSource(EntryReader& outer, const std::string& path);

// A zip file, entries in the order their data lies in the file.
Result<std::unique_ptr<EntryReader>> OpenZipReader(const std::string& path);

// Whether the first bytes of a file say zip ("PK\3\4", or "PK\5\6" for an empty one).
bool LooksLikeZip(const uint8_t* p, size_t n);

}  // namespace fanstore::meta
