#include "meta/namespace_image.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>

#include "meta/dataset.h"

namespace fanstore::meta {
namespace {

uint64_t Align8(uint64_t x) {
  return (x + 7) & ~uint64_t{7};
}

}  // namespace

std::string BuildNamespaceImage(const Dataset& ds,
                                const std::vector<std::string>& partition_paths) {
  // Every member once (directories merged), in path order.
  std::vector<std::pair<std::string_view, MemberRef>> all;
  std::vector<std::string_view> stack = {""};
  while (!stack.empty()) {
    const std::string_view dir = stack.back();
    stack.pop_back();
    all.emplace_back(dir, *ds.Lookup(dir));
    for (const MemberRef& r : ds.Children(dir)) {
      const MemberView v = ds.View(r);
      if (v.kind() == Kind::kDir)
        stack.push_back(v.path);
      else
        all.emplace_back(v.path, r);
    }
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  const uint64_t n = all.size();
  std::vector<ImageEntry> entries(n);
  std::string strings;
  std::vector<uint32_t> children;
  // Index of each path, for parents.
  std::vector<std::pair<std::string_view, uint32_t>> index;
  index.reserve(n);
  for (uint32_t i = 0; i < n; ++i) index.emplace_back(all[i].first, i);
  auto find = [&](std::string_view p) {
    auto it = std::lower_bound(index.begin(), index.end(), p,
                               [](const auto& a, std::string_view b) { return a.first < b; });
    return it->second;
  };
  for (uint32_t i = 0; i < n; ++i) {
    const MemberView v = ds.View(all[i].second);
    ImageEntry& e = entries[i];
    e = ImageEntry{};
    e.size = v.rec.size;
    e.mtime_ns = v.rec.mtime_ns;
    e.data_offset = v.rec.data_offset;
    e.stored_size = v.rec.stored_size;
    e.path_off = static_cast<uint32_t>(strings.size());
    e.path_len = static_cast<uint32_t>(v.path.size());
    strings.append(v.path);
    if (v.kind() == Kind::kSymlink) strings.append(v.target);
    e.mode = v.rec.mode;
    e.uid = v.rec.uid;
    e.gid = v.rec.gid;
    e.crc32c = v.rec.crc32c;
    e.partition = all[i].second.partition;
    e.kind = v.rec.kind;
    e.codec = v.rec.codec;
    e.nlink = v.kind() == Kind::kDir ? 2 : 1;
    e.parent = i == 0 ? 0 : find(ParentPath(v.path));
    e.first_child = 0;
    e.child_count = 0;
  }
  // Children lists in name order (entries are in path order; group by parent).
  std::vector<std::vector<uint32_t>> kids(n);
  for (uint32_t i = 1; i < n; ++i) {
    kids[entries[i].parent].push_back(i);
    if (entries[i].kind == static_cast<uint8_t>(Kind::kDir)) ++entries[entries[i].parent].nlink;
  }
  for (uint32_t i = 0; i < n; ++i) {
    auto& k = kids[i];
    std::sort(k.begin(), k.end(), [&](uint32_t a, uint32_t b) {
      return BaseName(all[a].first) < BaseName(all[b].first);
    });
    entries[i].first_child = static_cast<uint32_t>(children.size());
    entries[i].child_count = static_cast<uint32_t>(k.size());
    children.insert(children.end(), k.begin(), k.end());
  }
  uint64_t buckets = 16;
  while (buckets < n * 2) buckets <<= 1;
  std::vector<ImageBucket> table(buckets, ImageBucket{0, 0});
  for (uint32_t i = 0; i < n; ++i) {
    const uint64_t hash = NamespaceView::Hash(all[i].first);
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
  h.dataset_id = ds.manifest().dataset_id;
  std::string out(h.total_size, '\0');
  std::memcpy(out.data(), &h, sizeof h);
  std::memcpy(out.data() + h.entries_off, entries.data(), n * sizeof(ImageEntry));
  std::memcpy(out.data() + h.buckets_off, table.data(), buckets * sizeof(ImageBucket));
  std::memcpy(out.data() + h.children_off, children.data(), children.size() * 4);
  std::memcpy(out.data() + h.strings_off, strings.data(), strings.size());
  std::memcpy(out.data() + h.parts_off, parts.data(), parts.size());
  return out;
}

}  // namespace fanstore::meta
