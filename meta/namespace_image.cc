#include "meta/namespace_image.h"

#include <sys/stat.h>
#include <tsl/robin_map.h>

#include <algorithm>
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
  // Path order: a directory's children are then contiguous runs in name order (siblings
  // share their parent's prefix), so grouping by parent below keeps them sorted.
  // A directory held by several partitions keeps the lowest partition id, so the image does
  // not depend on the order the members arrived in.
  std::sort(all.begin(), all.end(), [](const NsMember& a, const NsMember& b) {
    return a.path != b.path ? a.path < b.path : a.partition < b.partition;
  });
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

  std::vector<ImageEntry> entries(n);
  std::string strings;
  uint64_t string_bytes = 0;
  for (const NsMember& m : all) string_bytes += m.path.size() + m.target.size();
  strings.reserve(string_bytes);
  std::vector<uint32_t> child_count(n, 0);
  for (uint32_t i = 0; i < n; ++i) {
    const NsMember& m = all[i];
    ImageEntry& e = entries[i];
    e = ImageEntry{};
    e.size = m.rec.size;
    e.mtime_ns = m.rec.mtime_ns;
    e.data_offset = m.rec.data_offset;
    e.stored_size = m.rec.stored_size;
    e.path_off = static_cast<uint32_t>(strings.size());
    e.path_len = static_cast<uint32_t>(m.path.size());
    if (strings.size() + m.path.size() + m.target.size() > UINT32_MAX)
      return Status::Error("namespace: more than 4 GiB of path names");
    strings.append(m.path);
    strings.append(m.target);
    e.mode = m.rec.mode;
    e.uid = m.rec.uid;
    e.gid = m.rec.gid;
    e.crc32c = m.rec.crc32c;
    e.partition = m.partition;
    e.kind = m.rec.kind;
    e.codec = m.rec.codec;
    e.nlink = is_dir(m) ? 2 : 1;
    if (i > 0) {
      const auto it = dirs.find(ParentPath(m.path));
      if (it == dirs.end())
        return Status::Error("namespace: '" + std::string(m.path) + "' has no parent directory");
      e.parent = it->second;
      ++child_count[e.parent];
      if (is_dir(m)) ++entries[e.parent].nlink;
    }
  }
  // Children lists: a counting sort by parent, in path (= name) order within each.
  std::vector<uint32_t> children(n - 1);
  uint32_t next = 0;
  for (uint32_t i = 0; i < n; ++i) {
    entries[i].first_child = next;
    next += child_count[i];
  }
  for (uint32_t i = 1; i < n; ++i) {
    ImageEntry& parent = entries[entries[i].parent];
    children[parent.first_child + parent.child_count++] = i;
  }
  uint64_t buckets = 16;
  while (buckets < n * 2) buckets <<= 1;
  std::vector<ImageBucket> table(buckets, ImageBucket{0, 0});
  for (uint32_t i = 0; i < n; ++i) {
    const uint64_t hash = NamespaceView::Hash(all[i].path);
    uint64_t b = hash & (buckets - 1);
    while (table[b].entry_plus_one) b = (b + 1) & (buckets - 1);
    table[b] = ImageBucket{i + 1, static_cast<uint32_t>(hash >> 32)};
  }
  std::string parts;
  for (const std::string& p : partition_paths) parts += p + '\0';

  ImageHeader h{};
  std::memcpy(h.magic, kImageMagic.data(), 8);
  h.version = 2;
  h.partition_count = static_cast<uint32_t>(partition_paths.size());
  h.entry_count = n;
  h.bucket_count = buckets;
  h.entries_off = Align8(sizeof h);
  h.buckets_off = Align8(h.entries_off + n * sizeof(ImageEntry));
  h.children_off = Align8(h.buckets_off + buckets * sizeof(ImageBucket));
  h.strings_off = Align8(h.children_off + children.size() * 4);
  h.parts_off = Align8(h.strings_off + strings.size());
  h.total_size = h.parts_off + parts.size();
  h.dataset_id = dataset_id;
  std::string out(h.total_size, '\0');
  std::memcpy(out.data(), &h, sizeof h);
  std::memcpy(out.data() + h.entries_off, entries.data(), n * sizeof(ImageEntry));
  std::memcpy(out.data() + h.buckets_off, table.data(), buckets * sizeof(ImageBucket));
  std::memcpy(out.data() + h.children_off, children.data(), children.size() * 4);
  std::memcpy(out.data() + h.strings_off, strings.data(), strings.size());
  std::memcpy(out.data() + h.parts_off, parts.data(), parts.size());
  return out;
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
