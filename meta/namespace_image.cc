#include "meta/namespace_image.h"

#include <sys/stat.h>
#include <tsl/robin_map.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "meta/access.h"
#include "meta/dataset.h"
#include "meta/exchange.h"
#include "meta/member.h"

namespace fanstore::meta {
namespace {

uint64_t Align8(uint64_t x) {
  return (x + 7) & ~uint64_t{7};
}

bool IsDir(const ImageEntry& e) {
  return e.kind == static_cast<uint8_t>(Kind::kDir);
}

// The type bits of st_mode are those of the kind (a member is a file, directory or link).
bool ModeMatchesKind(uint32_t mode, uint8_t kind) {
  switch (static_cast<Kind>(kind)) {
    case Kind::kFile:
      return S_ISREG(mode);
    case Kind::kDir:
      return S_ISDIR(mode);
    case Kind::kSymlink:
      return S_ISLNK(mode);
  }
  return false;
}

// The phases of a build, over an image laid out for `total` entries (every member
// exchanged; directories that several partitions hold then become one entry each).
struct Builder {
  ImageEntry* entries;
  ImageBucket* table;
  uint64_t bucket_mask;
  uint32_t* children;
  char* strings;
  uint32_t total;

  // A member by its path, for ordering: k is its decode position (its entry before
  // Dedupe; the later of two equal paths comes from the higher partition).
  struct Key {
    uint32_t path_off, path_len, k;
  };
  std::vector<Key> keys;
  std::vector<uint32_t> remap;  // decode position -> entry index (kNoEntry: merged away)
  uint32_t n = 0;               // entries after Dedupe

  std::string_view PathOf(const Key& x) const { return {strings + x.path_off, x.path_len}; }

  // Every block, in partition order: entry k is the k-th member decoded, its path written
  // straight into the string table.
  Status Decode(const std::vector<ExchangeBlock>& blocks) {
    keys.resize(total);
    uint32_t k = 0;
    uint64_t string_pos = 0;
    for (const ExchangeBlock& b : blocks) {
      BlockDecoder dec(b, strings + string_pos);
      IndexRecord r;
      while (dec.Next(&r)) {
        if (r.mode > UINT16_MAX || !ModeMatchesKind(r.mode, r.kind))
          return Status::Error("namespace: member '" +
                               std::string(strings + string_pos + r.path_offset, r.path_length) +
                               "' of partition " + std::to_string(b.partition) +
                               " has an invalid mode");
        ImageEntry& e = entries[k];
        e.size = r.size;
        e.mtime_ns = r.mtime_ns;
        e.stored_size = r.stored_size;
        e.path_off = static_cast<uint32_t>(string_pos + r.path_offset);
        e.path_len = static_cast<uint16_t>(r.path_length);  // (<= kMaxPathBytes: the exchange's)
        e.mode = static_cast<uint16_t>(r.mode);
        e.uid = r.uid;
        e.gid = r.gid;
        e.partition = b.partition;
        e.kind = r.kind;
        e.codec = r.codec;
        if (IsDir(e)) {
          e.first_child = e.child_count = 0;  // in Link
          e.nlink = 2;                        // + subdirectories, in Link
        } else {
          e.data_offset = r.data_offset;
          e.crc32c = r.crc32c;
        }
        keys[k] = Key{e.path_off, e.path_len, k};
        ++k;
      }
      if (!dec.status().ok()) return dec.status();
      string_pos += b.string_bytes;
    }
    return Status::Ok();
  }

  // Path order: a directory's children are then contiguous runs in name order (siblings
  // share their parent's prefix), so grouping by parent in Link keeps them sorted. Each
  // block is a sorted run (a partition's index is in path order): merging the runs
  // pairwise costs n log(runs) comparisons instead of a sort's n log n.
  void Order() {
    const auto less = [&](const Key& a, const Key& b) {
      const int c = PathOf(a).compare(PathOf(b));
      return c != 0 ? c < 0 : a.k < b.k;
    };
    std::vector<size_t> runs = {0};
    for (size_t i = 1; i < keys.size(); ++i)
      if (less(keys[i], keys[i - 1])) runs.push_back(i);
    runs.push_back(keys.size());
    if (runs.size() > 64) {
      std::sort(keys.begin(), keys.end(), less);  // unsorted input: a sort is cheaper
      return;
    }
    while (runs.size() > 2) {
      std::vector<size_t> merged = {0};
      for (size_t r = 0; r + 1 < runs.size(); r += 2) {
        const size_t end = r + 2 < runs.size() ? runs[r + 2] : runs[r + 1];
        if (r + 2 < runs.size())
          std::inplace_merge(keys.begin() + static_cast<long>(runs[r]),
                             keys.begin() + static_cast<long>(runs[r + 1]),
                             keys.begin() + static_cast<long>(end), less);
        merged.push_back(end);
      }
      runs = std::move(merged);
    }
  }

  // One entry per path: a directory held by several partitions keeps the lowest
  // partition's entry (so the image does not depend on the order blocks arrived in); a
  // file or symlink twice is an error. Entry indexes become decode positions with the
  // merged-away ones squeezed out, the root first.
  Status Dedupe() {
    remap.assign(total, kNoEntry);
    size_t w = 0;
    for (size_t r = 0; r < keys.size(); ++r) {
      if (w > 0 && PathOf(keys[w - 1]) == PathOf(keys[r])) {
        const ImageEntry &a = entries[keys[w - 1].k], &b = entries[keys[r].k];
        if (IsDir(a) && IsDir(b)) continue;  // the same directory again
        return Status::Error("namespace: '" + std::string(PathOf(keys[r])) + "' is in partitions " +
                             std::to_string(a.partition) + " and " + std::to_string(b.partition));
      }
      remap[keys[r].k] = 0;
      keys[w++] = keys[r];
    }
    keys.resize(w);
    if (keys[0].path_len != 0 || !IsDir(entries[keys[0].k]))
      return Status::Error("namespace: no root directory");
    n = static_cast<uint32_t>(w);
    uint32_t next = 0;
    for (uint32_t d = 0; d < total; ++d) {
      if (remap[d] == kNoEntry) continue;
      remap[d] = next;
      if (next != d) entries[next] = entries[d];  // next < d: moves only downwards
      ++next;
    }
    std::memset(static_cast<void*>(entries + n), 0, (total - n) * sizeof(ImageEntry));
    const uint32_t root_at = remap[keys[0].k];
    if (root_at != 0) {
      std::swap(entries[0], entries[root_at]);
      for (uint32_t& x : remap)
        if (x == 0 || x == root_at) x = x == 0 ? root_at : 0;
    }
    return Status::Ok();
  }

  // Parents, directories' link counts, and the children lists (a counting sort by parent,
  // in path = name order within each).
  Status Link() {
    tsl::robin_map<std::string_view, uint32_t> dirs;
    for (const Key& key : keys)
      if (IsDir(entries[remap[key.k]])) dirs.emplace(PathOf(key), remap[key.k]);
    std::vector<uint32_t> child_count(n, 0);
    std::string_view last_parent_path;
    uint32_t last_parent = 0;
    for (uint32_t i = 1; i < n; ++i) {
      const std::string_view path = PathOf(keys[i]);
      ImageEntry& e = entries[remap[keys[i].k]];
      const std::string_view parent_path = ParentPath(path);
      if (parent_path != last_parent_path || i == 1) {  // siblings come in runs: look up once
        const auto it = dirs.find(parent_path);
        if (it == dirs.end())
          return Status::Error("namespace: '" + std::string(path) + "' has no parent directory");
        last_parent_path = parent_path;
        last_parent = it->second;
      }
      e.parent = last_parent;
      ++child_count[e.parent];
      if (IsDir(e)) ++entries[e.parent].nlink;
    }
    uint32_t next = 0;
    for (uint32_t i = 0; i < n; ++i) {
      if (!IsDir(entries[i])) continue;  // (a file's bytes there are its data offset)
      entries[i].first_child = next;
      next += child_count[i];
    }
    for (uint32_t i = 1; i < n; ++i) {
      const uint32_t idx = remap[keys[i].k];
      ImageEntry& parent = entries[entries[idx].parent];
      children[parent.first_child + parent.child_count++] = idx;
    }
    // Path order puts every parent before its children.
    entries[0].flags = kEntryPathOpen;
    for (uint32_t i = 1; i < n; ++i) {
      ImageEntry& e = entries[remap[keys[i].k]];
      const ImageEntry& parent = entries[e.parent];
      e.flags =
          (parent.flags & kEntryPathOpen) && OpenToAll(parent.mode, kMayExec) ? kEntryPathOpen : 0;
    }
    return Status::Ok();
  }

  // The hash table, with the buckets prefetched a few entries ahead (each insert is
  // otherwise a cache miss in a table of tens of MB).
  void Hash() {
    constexpr uint32_t kAhead = 16;
    uint64_t ahead[kAhead];
    const auto hash_of = [&](uint32_t i) {
      return NamespaceView::Hash({strings + entries[i].path_off, entries[i].path_len});
    };
    for (uint32_t i = 0; i < std::min(n, kAhead); ++i) ahead[i] = hash_of(i);
    for (uint32_t i = 0; i < n; ++i) {
      const uint64_t hash = ahead[i % kAhead];
      if (i + kAhead < n) {
        ahead[i % kAhead] = hash_of(i + kAhead);
        __builtin_prefetch(&table[ahead[i % kAhead] & bucket_mask], 1);
      }
      uint64_t b = hash & bucket_mask;
      while (table[b].entry_plus_one) b = (b + 1) & bucket_mask;
      table[b] = ImageBucket{i + 1, static_cast<uint32_t>(hash >> 32), entries[i].path_off,
                             entries[i].path_len};
    }
  }
};

}  // namespace

Result<std::string> BuildNamespaceImage(std::string_view exchanged,
                                        const std::vector<std::string>& partition_paths,
                                        uint64_t dataset_id) {
  std::string out;
  auto r = BuildNamespaceImageInto(exchanged, partition_paths, dataset_id,
                                   [&](uint64_t size) -> uint8_t* {
                                     out.assign(size, '\0');
                                     return reinterpret_cast<uint8_t*>(out.data());
                                   });
  if (!r.ok()) return r.status();
  return out;
}

Result<uint64_t> BuildNamespaceImageInto(std::string_view exchanged,
                                         const std::vector<std::string>& partition_paths,
                                         uint64_t dataset_id,
                                         const std::function<uint8_t*(uint64_t)>& allocate) {
  auto split = SplitBlocks(exchanged, static_cast<uint32_t>(partition_paths.size()));
  if (!split.ok()) return split.status();
  uint64_t total = 0, string_bytes = 0;
  for (const ExchangeBlock& b : *split) {
    total += b.count;
    string_bytes += b.string_bytes;
  }
  if (total == 0) return Status::Error("namespace: no root directory");
  if (total >= kNoEntry) return Status::Error("namespace: too many members");
  if (string_bytes > UINT32_MAX) return Status::Error("namespace: more than 4 GiB of path names");

  // Every section's size is bounded now: lay the image out for `total` entries, then
  // decode straight into it (no copy of the members is made).
  std::string parts;
  for (const std::string& p : partition_paths) parts += p + '\0';
  // A load factor between 0.4 and 0.8: buckets are 16 bytes, so a sparser table costs more
  // memory per entry than it saves in probes (tags make a probe past a bucket cheap, and
  // four buckets share a cache line).
  uint64_t buckets = 16;
  while (buckets < total + total / 4) buckets <<= 1;
  ImageHeader h{};
  std::memcpy(h.magic, kImageMagic.data(), 8);
  h.version = kImageVersion;
  h.partition_count = static_cast<uint32_t>(partition_paths.size());
  h.bucket_count = buckets;
  h.entries_off = (sizeof h + 63) & ~uint64_t{63};  // an entry is one cache line
  h.buckets_off = Align8(h.entries_off + total * sizeof(ImageEntry));
  h.children_off = Align8(h.buckets_off + buckets * sizeof(ImageBucket));
  h.strings_off = Align8(h.children_off + (total - 1) * 4);
  h.parts_off = Align8(h.strings_off + string_bytes);
  h.total_size = h.parts_off + parts.size();
  h.dataset_id = dataset_id;
  uint8_t* out = allocate(h.total_size);  // zeroed (the gaps between sections stay zero)
  if (!out)
    return Status::Error("namespace image: cannot allocate " + std::to_string(h.total_size) +
                         " bytes");
  std::memcpy(out + h.parts_off, parts.data(), parts.size());
  Builder b{reinterpret_cast<ImageEntry*>(out + h.entries_off),
            reinterpret_cast<ImageBucket*>(out + h.buckets_off),
            buckets - 1,
            reinterpret_cast<uint32_t*>(out + h.children_off),
            reinterpret_cast<char*>(out + h.strings_off),
            static_cast<uint32_t>(total)};
  FANSTORE_RETURN_IF_ERROR(b.Decode(*split));
  b.Order();
  FANSTORE_RETURN_IF_ERROR(b.Dedupe());
  FANSTORE_RETURN_IF_ERROR(b.Link());
  b.Hash();
  h.entry_count = b.n;
  std::memcpy(out, &h, sizeof h);
  return h.total_size;
}

std::string BuildNamespaceImage(const Dataset& ds,
                                const std::vector<std::string>& partition_paths) {
  std::string wire;
  for (uint32_t p = 0; p < ds.partitions().size(); ++p) EncodeMembers(ds.partitions()[p], p, &wire);
  auto image = BuildNamespaceImage(wire, partition_paths, ds.manifest().dataset_id);
  // Dataset::Open already refused duplicates, orphans and modes beyond 16 bits, so this
  // cannot fail.
  return image.ok() ? std::move(image).value() : std::string();
}

}  // namespace fanstore::meta
