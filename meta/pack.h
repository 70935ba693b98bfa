// Pack: turns a source tree into a packed dataset (manifest + partitions).
// Pipeline: scan (sorted) -> plan -> T worker threads read, checksum and compress members
// ahead of one writer that appends them in order to the partition files. At most
// 4 x T members (each <= kStreamThreshold) are in flight, so memory is bounded by threads,
// not by the dataset; larger members are streamed by the writer in chunks. The output is
// written to a hidden sibling directory and renamed into place only when complete, the
// manifest last, so a failed or interrupted pack never leaves OUT looking valid.
// Output bytes depend only on the tree and the options (no clock, no thread timing).
// Thread-safety: Pack() is reentrant; callbacks are called from the calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace fanstore::meta {

inline constexpr uint64_t kStreamThreshold = 8ull << 20;
// `auto`: keep a member deflated only if that saves at least 1/8 (12.5%) of its size.
inline constexpr uint64_t kAutoMinSavingDivisor = 8;
inline constexpr int kAutoLevel = 1;

struct CompressMode {
  enum Kind { kNone, kAuto, kLevel } kind = kAuto;
  int level = kAutoLevel;
  static Result<CompressMode> Parse(const std::string& s);  // none | auto | 0..3
  std::string ToString() const;
};

struct PackProgress {
  uint64_t files_done = 0, files_total = 0;
  uint64_t bytes_done = 0, bytes_total = 0;
};

struct PackOptions {
  std::string src;  // a directory (the tree packer)
  std::string out;
  // Or sources of any kind, packed in order into one namespace (pack_archives.cc): tar
  // archives (plain, gzip, zstd or xz; recognised by their first bytes), zip archives and
  // directories. Brace ranges ("{000..146}") and globs are expanded (ExpandSources). A
  // single directory with no prefix goes to the tree packer.
  std::vector<std::string> sources;
  std::string prefix;            // namespace directory the sources' members go under
  bool untar_nested = false;     // a member X.tar (.tar.gz, ...) becomes the directory X
  bool keep_shard_dirs = false;  // each archive's members under a directory named after it
  uint32_t partitions = 0;       // 0: DefaultPartitions(bytes)
  std::vector<std::string> broadcast;
  CompressMode compress;
  unsigned threads = 0;  // 0: all cores
  bool force = false;
  // Make OUT readable by everyone even when some members are not (they are then exposed
  // to anyone who can read OUT). Without it, such a tree gives OUT mode 0700 and its files
  // 0600: the partitions hold every member's bytes.
  bool public_output = false;
  std::function<void(const std::string&)> warn;
  std::function<void(const PackProgress&)> progress;  // called after each member
  // Called once the tree is scanned and before any file is read (totals in the argument).
  std::function<void(const PackProgress&)> on_scanned;
};

struct PackStats {
  uint64_t files = 0, dirs = 0, symlinks = 0, skipped = 0;
  uint64_t bytes_in = 0, bytes_stored = 0, output_bytes = 0;
  uint64_t compressed_members = 0;
  uint32_t partitions = 0;        // made, the broadcast one included
  uint32_t partitions_asked = 0;  // --partitions (0: the default)
  uint32_t sharded = 0;           // made, the broadcast one not included
  double seconds = 0;
  // The first member (in path order) that not everyone may read (a file or link without
  // read for all, a directory without read and search for all), "" when none; and its mode.
  std::string restricted_member;
  uint32_t restricted_mode = 0;
  bool private_output = false;  // OUT was made readable by its owner only
};

Result<PackStats> Pack(const PackOptions& opts);

// Expands brace ranges ("train-{000000..000146}.tar", zero padding kept) and then globs
// (sorted) in each pattern; a pattern without either is kept as it is. A glob that matches
// nothing is an error naming it.
Result<std::vector<std::string>> ExpandSources(const std::vector<std::string>& patterns);

// True if the first bytes look like an already-compressed format (JPEG, PNG, GIF, gzip,
// zip, xz, zstd, bzip2, MP4/MOV, WebP...): `auto` stores those raw without trying.
bool LooksCompressed(const uint8_t* p, size_t n);

// True for names of text formats (.txt, .csv, .tsv, .json, .jsonl, .ndjson, .xml, .html,
// .log, .yaml, .yml, .md), which programs read rather than map: `auto` deflates such a
// member over kStreamThreshold in blocks, and keeps other members that large raw.
bool LooksLikeText(std::string_view path);

}  // namespace fanstore::meta
