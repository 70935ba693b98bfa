// NamespaceImage: the whole namespace of a job as one read-only, position-independent
// block of bytes that fanrun builds once (from a Dataset) and every application process
// maps from shared memory. Lookups run directly on the image (an open-addressing table of
// path hashes), so a forked or exec'd process attaches with one mmap and builds nothing.
// Layout: ImageHeader; ImageEntry[entry_count] (64-aligned), the root first, then as
// decoded from the exchange (partition by partition, each in path order), the section sized
// for every member exchanged, so merged directories leave zero slots at its end; Bucket
// [bucket_count] (entry index + 1, 0 = empty, with 32 bits of the path's hash so a probe
// rarely touches an entry; linear probing); uint32 children[] (each directory's children
// in name order); strings (paths, as decoded: a symlink's target follows its path);
// partition file paths (NUL-terminated, in partition order).
// Thread-safety: immutable once built; any number of threads and processes read it.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "meta/format.h"

namespace fanstore::meta {

class Dataset;

inline constexpr std::string_view kImageMagic = "FSNSIMG6";
// 4: buckets of 16 bytes (path offset and length); 5: 64-byte entries, 64-aligned;
// 6: entry flags (kEntryPathOpen).
inline constexpr uint32_t kImageVersion = 6;

// ImageEntry::flags. kEntryPathOpen: every directory above the entry in the dataset lets
// anyone search it (meta::OpenToAll), so reaching the entry needs no permission check.
inline constexpr uint16_t kEntryPathOpen = 1u << 0;

// A bucket repeats its entry's path offset and length, so a probe loads the entry and the
// stored path at once instead of one after the other (a `stat` is bound by these dependent
// memory loads once the namespace outgrows the cache; docs/design.md).
struct ImageBucket {
  uint32_t entry_plus_one;      // 0: empty
  uint32_t tag;                 // high 32 bits of the path's hash
  uint32_t path_off, path_len;  // the entry's, in the string table
};
static_assert(sizeof(ImageBucket) == 16);
inline constexpr uint32_t kNoEntry = UINT32_MAX;

// The entry of the path of `n` bytes with hash `hash` (HashPath) among an image's buckets
// (bucket_count - 1 = `mask`), or kNoEntry; `same(bucket)` compares the bucket's path with
// it, for a bucket whose tag and length match. NamespaceView::Lookup and the runtime's
// prefilter share it; the prefilter compares without library calls or vector registers, so
// this has internal linkage: each translation unit compiles its own copy with its flags.
template <typename Same>
static inline uint32_t ProbeBuckets(const ImageBucket* buckets, uint64_t mask, uint64_t hash,
                                    size_t n, Same same) {
  const uint32_t tag = static_cast<uint32_t>(hash >> 32);
  for (uint64_t b = hash & mask;; b = (b + 1) & mask) {
    const ImageBucket& k = buckets[b];
    if (k.entry_plus_one == 0) return kNoEntry;
    if (k.tag == tag && k.path_len == n && same(k)) return k.entry_plus_one - 1;
  }
}

struct ImageHeader {
  char magic[8];
  uint32_t version;
  uint32_t partition_count;
  uint64_t entry_count;
  uint64_t bucket_count;  // a power of two
  uint64_t entries_off, buckets_off, children_off, strings_off, parts_off;
  uint64_t total_size;
  uint64_t dataset_id;
};

// One cache line (the entries section is 64-aligned): a `stat` answered from the image loads
// one line of it, and the image's fresh pages (most of start-up, docs/scaling.md) shrink
// with it. A directory has no data, so its children and link count share the bytes of a
// file's data location and checksum: read the file fields only for files and symlinks,
// the directory ones only for directories (`kind`).
struct ImageEntry {
  uint64_t size;
  int64_t mtime_ns;
  union {
    uint64_t data_offset;  // files and symlinks
    struct {
      uint32_t first_child;  // index into children[]
      uint32_t child_count;
    };  // directories
  };
  uint64_t stored_size;  // files (0 for directories)
  union {
    uint32_t crc32c;  // files and symlinks
    uint32_t nlink;   // directories: 2 + subdirectories (files and symlinks have 1)
  };
  uint32_t path_off;  // in the string table
  uint32_t parent;    // entry index (the root is its own parent)
  uint32_t uid, gid;
  uint32_t partition;
  uint16_t path_len;  // (paths are at most kMaxPathBytes, checked where they are read)
  uint16_t mode;      // st_mode (type and permission bits fit 16 bits)
  uint8_t kind;       // Kind
  uint8_t codec;      // Codec
  uint16_t flags;     // kEntry*
};
static_assert(sizeof(ImageEntry) == 64);

// st_nlink of an entry: a directory's count, 1 for files and symlinks (whose bytes there
// are their checksum).
inline uint32_t LinkCount(const ImageEntry& e) {
  return e.kind == static_cast<uint8_t>(Kind::kDir) ? e.nlink : 1;
}
static_assert(kMaxPathBytes <= std::numeric_limits<decltype(ImageEntry::path_len)>::max(),
              "every member path's length must fit in an image entry");
static_assert(kMaxPartitions - 1 <= std::numeric_limits<decltype(ImageEntry::partition)>::max(),
              "every partition id must fit in an image entry");

// Builds the image from an exchange (meta/exchange.h: blocks in any order; a directory may
// come from several partitions and is merged, a file or symlink twice is an error, as is a
// member whose parent directory is missing, or a damaged block). `partition_paths[p]` is
// where partition p can be read on this node, "" when only other nodes hold it (its
// members are fetched by the agent).
Result<std::string> BuildNamespaceImage(std::string_view exchanged,
                                        const std::vector<std::string>& partition_paths,
                                        uint64_t dataset_id);
// The same, written into memory that `allocate(size)` returns (zero-filled, e.g. a fresh
// shared mapping); returns the image's size.
Result<uint64_t> BuildNamespaceImageInto(std::string_view exchanged,
                                         const std::vector<std::string>& partition_paths,
                                         uint64_t dataset_id,
                                         const std::function<uint8_t*(uint64_t)>& allocate);
// The image of a dataset opened on one node (every partition local).
std::string BuildNamespaceImage(const Dataset& ds, const std::vector<std::string>& partition_paths);

// A view of an image in memory (typically a read-only mapping).
class NamespaceView {
 public:
  // Checks every byte that a lookup, a walk or a read will trust: the header and sections
  // (sizes computed without overflow, aligned, inside `bytes`), every entry (kind and
  // mode agree, its path and target inside the string table, a parent that is a directory
  // whose path is the entry's parent path, children that name it as their parent, a
  // partition that exists, flags that follow from the parents' modes) and every bucket
  // (an entry and its path, as many as there are entries, at least one empty). A damaged or
  // hostile image is an error naming what is wrong, never a crash or an endless probe.
  static Result<NamespaceView> Attach(std::span<const uint8_t> bytes);
  // Only the header and the sections' layout (sizes without overflow, alignment, bounds):
  // O(1), for an image that Attach checked already and that nobody else can have changed
  // since (the runtime's, in the user's private job directory, owned by the user and not
  // writable by others: runtime/process/state.cc). Entries are then trusted as they are.
  static Result<NamespaceView> AttachLayout(std::span<const uint8_t> bytes);

  uint64_t size() const { return h_->entry_count; }
  const ImageEntry& entry(uint32_t i) const { return entries_[i]; }
  std::string_view path(const ImageEntry& e) const { return {strings_ + e.path_off, e.path_len}; }
  std::string_view name(const ImageEntry& e) const;
  std::string_view target(const ImageEntry& e) const {
    return {strings_ + e.path_off + e.path_len, static_cast<size_t>(e.size)};
  }
  // The entry index of `path` (relative, no leading '/', "" = root), or kNoEntry.
  uint32_t Lookup(std::string_view path) const noexcept;
  uint32_t Child(const ImageEntry& dir, uint32_t k) const { return children_[dir.first_child + k]; }
  uint32_t partition_count() const { return h_->partition_count; }
  const char* partition_path(uint32_t p) const { return part_paths_[p]; }
  uint64_t dataset_id() const { return h_->dataset_id; }

  // 64-bit hash of a path, a word at a time (the same in the builder and every reader).
  static uint64_t Hash(std::string_view s) noexcept;

  // Raw sections, for the runtime's general-registers-only fast path (prefilter.cc).
  const ImageEntry* entries() const { return entries_; }
  const ImageBucket* buckets() const { return buckets_; }
  uint64_t bucket_mask() const { return h_->bucket_count - 1; }
  const char* strings() const { return strings_; }

 private:
  Status CheckEntries(uint64_t child_slots, uint64_t string_bytes) const;

  const ImageHeader* h_ = nullptr;
  const ImageEntry* entries_ = nullptr;
  const ImageBucket* buckets_ = nullptr;
  const uint32_t* children_ = nullptr;
  const char* strings_ = nullptr;
  std::vector<const char*> part_paths_;
};

}  // namespace fanstore::meta
