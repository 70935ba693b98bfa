#include "meta/namespace_image.h"

#include <sys/stat.h>
#include <tsl/robin_map.h>

#include <algorithm>
#include <functional>
#include <cstring>

#include "meta/dataset.h"
#include "meta/exchange.h"
#include "meta/member.h"

namespace fanstore::meta {
namespace {

uint64_t Align8(uint64_t x) {
  return (x + 7) & ~uint64_t{7};
}

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
  const std::vector<ExchangeBlock>& blocks = *split;
  uint64_t total = 0, string_bytes = 0;
  for (const ExchangeBlock& b : blocks) {
    total += b.count;
    string_bytes += b.string_bytes;
  }
  if (total == 0) return Status::Error("namespace: no root directory");
  if (total >= kNoEntry) return Status::Error("namespace: too many members");
  if (string_bytes > UINT32_MAX) return Status::Error("namespace: more than 4 GiB of path names");

  // Every section's size is bounded now: lay the image out for `total` entries (a directory
  // that several partitions hold becomes one entry; the slots this frees at the end of the
  // entry table stay zero), then decode straight into it: no copy of the members is made.
  std::string parts;
  for (const std::string& p : partition_paths) parts += p + '\0';
  uint64_t buckets = 16;
  while (buckets < total * 2) buckets <<= 1;
  ImageHeader h{};
  std::memcpy(h.magic, kImageMagic.data(), 8);
  h.version = 3;
  h.partition_count = static_cast<uint32_t>(partition_paths.size());
  h.bucket_count = buckets;
  h.entries_off = Align8(sizeof h);
  h.buckets_off = Align8(h.entries_off + total * sizeof(ImageEntry));
  h.children_off = Align8(h.buckets_off + buckets * sizeof(ImageBucket));
  h.strings_off = Align8(h.children_off + (total - 1) * 4);
  h.parts_off = Align8(h.strings_off + string_bytes);
  h.total_size = h.parts_off + parts.size();
  h.dataset_id = dataset_id;
  uint8_t* out = allocate(h.total_size);  // zeroed (the gaps between sections stay zero)
  if (!out)
    return Status::Error("namespace image: cannot allocate " + std::to_string(h.total_size) + " bytes");
  auto* entries = reinterpret_cast<ImageEntry*>(out + h.entries_off);
  auto* table = reinterpret_cast<ImageBucket*>(out + h.buckets_off);
  auto* children = reinterpret_cast<uint32_t*>(out + h.children_off);
  char* strings = reinterpret_cast<char*>(out + h.strings_off);
  std::memcpy(out + h.parts_off, parts.data(), parts.size());

  // Decode every block (in partition order): entry k is the k-th member decoded.
  struct Key {
    uint32_t path_off, path_len, k;
  };
  std::vector<Key> keys(total);
  const auto is_dir = [&](uint32_t k) { return entries[k].kind == static_cast<uint8_t>(Kind::kDir); };
  uint32_t k = 0;
  uint64_t string_pos = 0;
  for (const ExchangeBlock& b : blocks) {
    BlockDecoder dec(b, strings + string_pos);
    IndexRecord r;
    while (dec.Next(&r)) {
      ImageEntry& e = entries[k];
      e.size = r.size;
      e.mtime_ns = r.mtime_ns;
      e.data_offset = r.data_offset;
      e.stored_size = r.stored_size;
      e.path_off = static_cast<uint32_t>(string_pos + r.path_offset);
      e.path_len = r.path_length;
      e.mode = r.mode;
      e.uid = r.uid;
      e.gid = r.gid;
      e.crc32c = r.crc32c;
      e.partition = b.partition;
      e.kind = r.kind;
      e.codec = r.codec;
      e.nlink = e.kind == static_cast<uint8_t>(Kind::kDir) ? 2 : 1;  // + subdirectories, below
      keys[k] = Key{e.path_off, e.path_len, k};
      ++k;
    }
    if (!dec.status().ok()) return dec.status();
    string_pos += b.string_bytes;
  }

  // Path order: a directory's children are then contiguous runs in name order (siblings
  // share their parent's prefix), so grouping by parent below keeps them sorted. Equal
  // paths (a directory held by several partitions) order by partition, and the lowest
  // partition's entry is kept, so the image does not depend on the order blocks arrived
  // in. Each block is a sorted run (a partition's index is in path order): merging the runs
  // pairwise costs n log(runs) comparisons instead of a sort's n log n.
  const auto path_of = [&](const Key& x) { return std::string_view(strings + x.path_off, x.path_len); };
  const auto less = [&](const Key& a, const Key& b) {
    const int c = path_of(a).compare(path_of(b));
    return c != 0 ? c < 0 : a.k < b.k;
  };
  std::vector<size_t> runs = {0};
  for (size_t i = 1; i < keys.size(); ++i)
    if (less(keys[i], keys[i - 1])) runs.push_back(i);
  runs.push_back(keys.size());
  if (runs.size() > 64) {
    std::sort(keys.begin(), keys.end(), less);  // unsorted input: a sort is cheaper
  } else {
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
  // One entry per path; entry indexes are decode positions with the merged-away ones
  // squeezed out (remap), the root first.
  std::vector<uint32_t> remap(total, kNoEntry);
  size_t w = 0;
  for (size_t r = 0; r < keys.size(); ++r) {
    if (w > 0 && path_of(keys[w - 1]) == path_of(keys[r])) {
      if (is_dir(keys[w - 1].k) && is_dir(keys[r].k)) continue;  // the same directory again
      return Status::Error("namespace: '" + std::string(path_of(keys[r])) + "' is in partitions " +
                           std::to_string(entries[keys[w - 1].k].partition) + " and " +
                           std::to_string(entries[keys[r].k].partition));
    }
    remap[keys[r].k] = 0;
    keys[w++] = keys[r];
  }
  keys.resize(w);
  if (keys[0].path_len != 0 || !is_dir(keys[0].k)) return Status::Error("namespace: no root directory");
  const uint32_t n = static_cast<uint32_t>(w);
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
  h.entry_count = n;
  std::memcpy(out, &h, sizeof h);

  tsl::robin_map<std::string_view, uint32_t> dirs;
  for (const Key& key : keys)
    if (entries[remap[key.k]].kind == static_cast<uint8_t>(Kind::kDir)) dirs.emplace(path_of(key), remap[key.k]);
  std::vector<uint32_t> child_count(n, 0);
  std::string_view last_parent_path;
  uint32_t last_parent = 0;
  for (uint32_t i = 1; i < n; ++i) {
    const std::string_view path = path_of(keys[i]);
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
    if (e.kind == static_cast<uint8_t>(Kind::kDir)) ++entries[e.parent].nlink;
  }
  // Children lists: a counting sort by parent, in path (= name) order within each.
  next = 0;
  for (uint32_t i = 0; i < n; ++i) {
    entries[i].first_child = next;
    next += child_count[i];
  }
  for (uint32_t i = 1; i < n; ++i) {
    const uint32_t idx = remap[keys[i].k];
    ImageEntry& parent = entries[entries[idx].parent];
    children[parent.first_child + parent.child_count++] = idx;
  }
  // The hash table, with the buckets prefetched a few entries ahead (each insert is
  // otherwise a cache miss in a table of tens of MB).
  const uint64_t mask = buckets - 1;
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
      __builtin_prefetch(&table[ahead[i % kAhead] & mask], 1);
    }
    uint64_t b = hash & mask;
    while (table[b].entry_plus_one) b = (b + 1) & mask;
    table[b] = ImageBucket{i + 1, static_cast<uint32_t>(hash >> 32)};
  }
  return h.total_size;
}

std::string BuildNamespaceImage(const Dataset& ds,
                                const std::vector<std::string>& partition_paths) {
  std::string wire;
  for (uint32_t p = 0; p < ds.partitions().size(); ++p) EncodeMembers(ds.partitions()[p], p, &wire);
  auto image = BuildNamespaceImage(wire, partition_paths, ds.manifest().dataset_id);
  // Dataset::Open already refused duplicates and orphans, so this cannot fail.
  return image.ok() ? std::move(image).value() : std::string();
}

}  // namespace fanstore::meta
