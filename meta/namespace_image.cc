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

Result<std::string> BuildNamespaceImage(std::vector<NsMember> all,
                                        const std::vector<std::string>& partition_paths,
                                        uint64_t dataset_id) {
  std::string out;
  auto r = BuildNamespaceImageInto(std::move(all), partition_paths, dataset_id,
                                   [&](uint64_t size) -> uint8_t* {
                                     out.assign(size, '\0');
                                     return reinterpret_cast<uint8_t*>(out.data());
                                   });
  if (!r.ok()) return r.status();
  return out;
}

Result<uint64_t> BuildNamespaceImageInto(std::vector<NsMember> all,
                                         const std::vector<std::string>& partition_paths,
                                         uint64_t dataset_id,
                                         const std::function<uint8_t*(uint64_t)>& allocate) {
  // Path order: a directory's children are then contiguous runs in name order (siblings
  // share their parent's prefix), so grouping by parent below keeps them sorted.
  // A directory held by several partitions keeps the lowest partition id, so the image does
  // not depend on the order the members arrived in. Members arrive as sorted runs (each
  // partition's index is in path order): merging the runs pairwise costs n log(runs)
  // comparisons instead of a sort's n log n.
  const auto less = [](const NsMember& a, const NsMember& b) {
    const int c = a.path.compare(b.path);
    return c != 0 ? c < 0 : a.partition < b.partition;
  };
  std::vector<size_t> runs = {0};
  for (size_t i = 1; i < all.size(); ++i)
    if (less(all[i], all[i - 1])) runs.push_back(i);
  runs.push_back(all.size());
  if (runs.size() > 64) {
    std::sort(all.begin(), all.end(), less);  // unsorted input: a sort is cheaper
  } else {
    while (runs.size() > 2) {
      std::vector<size_t> merged = {0};
      for (size_t r = 0; r + 1 < runs.size(); r += 2) {
        const size_t end = r + 2 < runs.size() ? runs[r + 2] : runs[r + 1];
        if (r + 2 < runs.size())
          std::inplace_merge(all.begin() + static_cast<long>(runs[r]),
                             all.begin() + static_cast<long>(runs[r + 1]),
                             all.begin() + static_cast<long>(end), less);
        merged.push_back(end);
      }
      runs = std::move(merged);
    }
  }
  const auto is_dir = [](const NsMember& m) { return m.rec.kind == static_cast<uint8_t>(Kind::kDir); };
  size_t w = 0;
  for (size_t r = 0; r < all.size(); ++r) {
    if (w > 0 && all[w - 1].path == all[r].path) {
      if (is_dir(all[w - 1]) && is_dir(all[r])) continue;  // the same directory again
      return Status::Error("namespace: '" + std::string(all[r].path) + "' is in partitions " +
                           std::to_string(all[w - 1].partition) + " and " +
                           std::to_string(all[r].partition));
    }
    all[w++] = all[r];
  }
  all.resize(w);
  if (all.empty() || !all[0].path.empty() || !is_dir(all[0]))
    return Status::Error("namespace: no root directory");
  const uint64_t n = all.size();
  if (n >= kNoEntry) return Status::Error("namespace: too many members");
  tsl::robin_map<std::string_view, uint32_t> dirs;
  for (uint32_t i = 0; i < n; ++i)
    if (is_dir(all[i])) dirs.emplace(all[i].path, i);

  // Every section's size is known now: lay the image out, then write it in place.
  uint64_t string_bytes = 0;
  for (const NsMember& m : all) string_bytes += m.path.size() + m.target.size();
  if (string_bytes > UINT32_MAX) return Status::Error("namespace: more than 4 GiB of path names");
  std::string parts;
  for (const std::string& p : partition_paths) parts += p + '\0';
  uint64_t buckets = 16;
  while (buckets < n * 2) buckets <<= 1;
  ImageHeader h{};
  std::memcpy(h.magic, kImageMagic.data(), 8);
  h.version = 2;
  h.partition_count = static_cast<uint32_t>(partition_paths.size());
  h.entry_count = n;
  h.bucket_count = buckets;
  h.entries_off = Align8(sizeof h);
  h.buckets_off = Align8(h.entries_off + n * sizeof(ImageEntry));
  h.children_off = Align8(h.buckets_off + buckets * sizeof(ImageBucket));
  h.strings_off = Align8(h.children_off + (n - 1) * 4);
  h.parts_off = Align8(h.strings_off + string_bytes);
  h.total_size = h.parts_off + parts.size();
  h.dataset_id = dataset_id;
  uint8_t* out = allocate(h.total_size);  // zeroed (the gaps between sections stay zero)
  if (!out)
    return Status::Error("namespace image: cannot allocate " + std::to_string(h.total_size) + " bytes");
  std::memcpy(out, &h, sizeof h);
  auto* entries = reinterpret_cast<ImageEntry*>(out + h.entries_off);
  auto* table = reinterpret_cast<ImageBucket*>(out + h.buckets_off);
  auto* children = reinterpret_cast<uint32_t*>(out + h.children_off);
  char* strings = reinterpret_cast<char*>(out + h.strings_off);
  std::memcpy(out + h.parts_off, parts.data(), parts.size());

  std::vector<uint32_t> child_count(n, 0);
  uint64_t string_pos = 0;
  std::string_view last_parent_path;
  uint32_t last_parent = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const NsMember& m = all[i];
    ImageEntry& e = entries[i];
    e.size = m.rec.size;
    e.mtime_ns = m.rec.mtime_ns;
    e.data_offset = m.rec.data_offset;
    e.stored_size = m.rec.stored_size;
    e.path_off = static_cast<uint32_t>(string_pos);
    e.path_len = static_cast<uint32_t>(m.path.size());
    // (empty views may have a null data(): memcpy must not see them)
    if (!m.path.empty()) std::memcpy(strings + string_pos, m.path.data(), m.path.size());
    string_pos += m.path.size();
    if (!m.target.empty()) std::memcpy(strings + string_pos, m.target.data(), m.target.size());
    string_pos += m.target.size();
    e.mode = m.rec.mode;
    e.uid = m.rec.uid;
    e.gid = m.rec.gid;
    e.crc32c = m.rec.crc32c;
    e.partition = m.partition;
    e.kind = m.rec.kind;
    e.codec = m.rec.codec;
    e.nlink += is_dir(m) ? 2 : 1;  // a directory's subdirectories were counted already
    if (i > 0) {
      const std::string_view parent_path = ParentPath(m.path);
      if (parent_path != last_parent_path || i == 1) {  // siblings come in runs: look up once
        const auto it = dirs.find(parent_path);
        if (it == dirs.end())
          return Status::Error("namespace: '" + std::string(m.path) + "' has no parent directory");
        last_parent_path = parent_path;
        last_parent = it->second;
      }
      e.parent = last_parent;
      ++child_count[e.parent];
      if (is_dir(m)) ++entries[e.parent].nlink;
    }
  }
  // Children lists: a counting sort by parent, in path (= name) order within each.
  uint32_t next = 0;
  for (uint32_t i = 0; i < n; ++i) {
    entries[i].first_child = next;
    next += child_count[i];
  }
  for (uint32_t i = 1; i < n; ++i) {
    ImageEntry& parent = entries[entries[i].parent];
    children[parent.first_child + parent.child_count++] = i;
  }
  // The hash table: hashes first, then inserts with the buckets prefetched a few ahead
  // (each insert is otherwise a cache miss in a table of tens of MB).
  std::vector<uint64_t> hashes(n);
  for (uint32_t i = 0; i < n; ++i) hashes[i] = NamespaceView::Hash(all[i].path);
  const uint64_t mask = buckets - 1;
  constexpr uint32_t kAhead = 16;
  for (uint32_t i = 0; i < n; ++i) {
    if (i + kAhead < n) __builtin_prefetch(&table[hashes[i + kAhead] & mask], 1);
    uint64_t b = hashes[i] & mask;
    while (table[b].entry_plus_one) b = (b + 1) & mask;
    table[b] = ImageBucket{i + 1, static_cast<uint32_t>(hashes[i] >> 32)};
  }
  return h.total_size;
}

std::string BuildNamespaceImage(const Dataset& ds,
                                const std::vector<std::string>& partition_paths) {
  std::vector<NsMember> all;
  for (uint32_t p = 0; p < ds.partitions().size(); ++p) AppendMembers(ds.partitions()[p], p, &all);
  auto image = BuildNamespaceImage(std::move(all), partition_paths, ds.manifest().dataset_id);
  // Dataset::Open already refused duplicates and orphans, so this cannot fail.
  return image.ok() ? std::move(image).value() : std::string();
}

}  // namespace fanstore::meta
