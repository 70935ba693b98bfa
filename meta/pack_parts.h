// The pieces the tree packer (pack.cc) and the archive packer (pack_archives.cc) share:
// the compression policy, whole-member encoding, the streaming of large members, and the
// output directory's checks and publication. Internal to meta.
// Thread-safety: Policy is a value; the functions are reentrant.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "compress/deflate.h"
#include "meta/manifest.h"
#include "meta/member.h"
#include "meta/pack.h"
#include "meta/partition_writer.h"

namespace fanstore::meta::pack_parts {

// A member's bytes as the writer will store them.
struct Encoded {
  Status status;
  Codec codec = Codec::kRaw;
  uint32_t crc = 0;
  std::vector<uint8_t> bytes;
};

// What `--compress` decides for one member.
class Policy {
 public:
  explicit Policy(const CompressMode& m) : mode_(m) {}
  // Worth trying to deflate these bytes (the first of a large member)?
  bool WantDeflate(const uint8_t* p, size_t n) const;
  // A member over kStreamThreshold is deflated only when asked for, or named as text.
  bool WantDeflateLarge(std::string_view path) const;
  // Keep the deflated form of `raw` bytes that became `packed`?
  bool Keep(uint64_t packed, uint64_t raw) const;
  int level() const { return mode_.kind == CompressMode::kNone ? 0 : mode_.level; }

 private:
  CompressMode mode_;
};

// Checksums a whole member and deflates it if the policy keeps that.
Encoded EncodeBytes(std::vector<uint8_t> raw, const Policy& policy, compress::Deflater& d);

// Where a large member's bytes come from.
class LargeInput {
 public:
  virtual ~LargeInput() = default;
  // Fills n bytes unless the member ends first.
  virtual Result<size_t> Read(uint8_t* p, size_t n) = 0;
  // Back to the member's first byte; false if the input cannot go back (an archive).
  virtual Result<bool> Rewind() = 0;
  // Fails if the member has more bytes than its size said.
  virtual Status CheckAtEnd() = 0;
  // The member as errors name it.
  virtual std::string Show() const = 0;
};

// Writes a member over kStreamThreshold in chunks: raw, or deflated in independent 1 MiB
// blocks with a table (Codec::kDeflateBlocks), blocks of a chunk deflated on `threads`
// threads. Fills rec's data fields.
Status StreamLarge(LargeInput& in, const Member& m, const Policy& policy, compress::Deflater& own,
                   PartitionWriter& w, Member& rec, unsigned threads);

// Checks OUT (absolute in *out_abs): not inside any of `sources` (absolute paths of
// directories or files), and absent, or replaceable with --force.
Status CheckOutput(const PackOptions& o, const std::vector<std::string>& sources,
                   std::string* out_abs);

// Writes the manifest into the finished `tmp` directory, makes it owner-only if asked,
// and renames it to `out` (replacing an old dataset there). Removes `tmp` on failure.
Status Publish(const std::string& tmp, const std::string& out, const Manifest& manifest,
               bool private_output);

// Sets stats->restricted_member and restricted_mode to the first member (in the given
// order) that not everyone may read: a file without read for all, a directory without
// read and search for all (symlinks are never restricted).
void FindRestricted(const std::vector<Member>& members, PackStats* stats);

// Archive sources: see PackOptions::sources.
Result<PackStats> PackArchives(const PackOptions& o);

}  // namespace fanstore::meta::pack_parts
