#include "meta/archive_merge.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <unordered_map>
#include <unordered_set>

#include "meta/glob.h"
#include "meta/pack_plan.h"

namespace fanstore::meta::archive_pack {

namespace {

// One member of the merged namespace.
struct Entry {
  Member m;
  uint32_t part = 0;  // global partition id (kBroadcastPart for the broadcast one)
  bool live = true;
  bool implicit = false;
};

}  // namespace

Result<PackStats> Merge(std::vector<std::unique_ptr<GroupPacker>>& groups,
                        const std::vector<Group>& plan, const PackOptions& o,
                        const std::string& tmp, const std::string& salt, Manifest& manifest) {
  std::vector<Entry> all;
  std::unordered_map<std::string, size_t> index;
  std::unordered_set<std::string> has_children;
  auto warn = [&](const std::string& w) {
    if (o.warn) o.warn(w);
  };
  std::vector<uint32_t> base(groups.size());
  uint32_t sharded = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    base[g] = sharded;
    sharded += static_cast<uint32_t>(groups[g]->writers().size());
  }
  all.push_back(Entry{groups[0]->recs()[0].m});
  index[""] = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<Rec>& recs = groups[g]->recs();
    for (size_t i = 1; i < recs.size(); ++i) {
      Rec& r = recs[i];
      if (!r.live) continue;
      const std::string& src = plan[g].sources[r.source];
      Entry e{r.m, r.part == kBroadcastPart ? kBroadcastPart : base[g] + r.part, true, r.implicit};
      if (r.link_to != SIZE_MAX) {
        const Rec& t = recs[r.link_to];
        e.m.data_offset = t.m.data_offset;
        e.m.stored_size = t.m.stored_size;
        e.m.codec = t.m.codec;
        e.m.crc32c = t.m.crc32c;
        e.m.size = t.m.size;
      } else if (!r.link_path.empty()) {
        auto t = index.find(r.link_path);
        if (t == index.end() || all[t->second].m.kind != Kind::kFile)
          return Status::Error(r.m.target + " is a hard link to '" + ShownPath(r.link_path) +
                               "', which is not a file before it in the archive");
        const Entry& te = all[t->second];  // (one inode: the target's attributes)
        e.m = te.m;
        e.m.path = r.m.path;
        e.part = te.part;
      }
      auto it = index.find(e.m.path);
      if (it != index.end()) {
        Entry& old = all[it->second];
        const std::string where = src + ": '" + ShownPath(e.m.path) + "'";
        if (e.m.kind == Kind::kDir) {
          if (old.m.kind == Kind::kDir) {
            if (!e.implicit) {
              old.m = e.m;
              old.implicit = false;
            }
            continue;
          }
          if (e.implicit)
            return Status::Error(where +
                                 " is a file in an earlier source, and a member needs it "
                                 "to be a directory");
          warn(where + " appears again as a directory; the later one wins, as with tar x");
        } else {
          if (old.m.kind == Kind::kDir && has_children.count(e.m.path))
            return Status::Error(where +
                                 " replaces a directory of an earlier source that is "
                                 "not empty");
          warn(where + " appears again; the later one wins, as with tar x");
        }
        old.live = false;
        index.erase(it);
      }
      for (std::string_view p = ParentPath(e.m.path);; p = ParentPath(p)) {
        if (!has_children.emplace(p).second || p.empty()) break;
      }
      index[e.m.path] = all.size();
      all.push_back(std::move(e));
    }
  }

  std::vector<size_t> order;
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i].live) order.push_back(i);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return all[a].m.path < all[b].m.path; });
  std::vector<Member> sorted;
  sorted.reserve(order.size());
  for (size_t i : order) sorted.push_back(all[i].m);
  if (sharded == 0) return Status::Error("pack: internal error: no partition");
  std::unique_ptr<PartitionWriter>* bcast = nullptr;
  for (auto& g : groups)
    if (g->bcast()) bcast = &g->bcast();
  const uint32_t total = sharded + (bcast ? 1 : 0);
  const uint64_t id = DatasetId(sorted, salt + ";parts=" + std::to_string(sharded));
  manifest.dataset_id = id;

  // Which partitions each directory belongs to: those of the members below it, or, with
  // nothing below, partition 0 (the broadcast one if a glob names it).
  auto is_bcast = [&](const std::string& path) {
    for (const std::string& g : o.broadcast)
      if (GlobMatch(g, path)) return true;
    return false;
  };
  auto slot = [&](uint32_t part) { return part == kBroadcastPart ? sharded : part; };
  std::unordered_map<std::string, std::vector<uint32_t>> dir_parts;
  auto mark = [&](std::string_view p, uint32_t part) {
    for (;;) {
      auto& v = dir_parts[std::string(p)];
      if (std::find(v.begin(), v.end(), part) != v.end()) break;
      v.push_back(part);
      if (p.empty()) break;
      p = ParentPath(p);
    }
  };
  std::vector<std::vector<size_t>> per(total);
  for (size_t i : order) {
    const Entry& e = all[i];
    if (e.m.kind == Kind::kDir) continue;
    per[slot(e.part)].push_back(i);
    mark(ParentPath(e.m.path), slot(e.part));
  }
  for (uint32_t p = 0; p < total; ++p) mark("", p);  // the root is in every partition
  for (size_t i : order) {
    const Entry& e = all[i];
    if (e.m.kind == Kind::kDir && !dir_parts.count(e.m.path))
      mark(e.m.path, bcast && is_bcast(e.m.path) ? sharded : 0);
  }
  for (size_t i : order) {
    const Entry& e = all[i];
    if (e.m.kind != Kind::kDir) continue;
    for (uint32_t p : dir_parts[e.m.path]) per[p].push_back(i);
  }
  std::vector<PartitionWriter*> writers;
  std::vector<std::string> files;
  for (size_t g = 0; g < groups.size(); ++g)
    for (size_t j = 0; j < groups[g]->writers().size(); ++j) {
      writers.push_back(groups[g]->writers()[j].get());
      files.push_back(tmp + "/g" + std::to_string(g) + "-" + std::to_string(j) + ".partial");
    }
  if (bcast) {
    writers.push_back(bcast->get());
    files.push_back(tmp + "/broadcast.partial");
  }
  PackStats stats;
  for (uint32_t p = 0; p < total; ++p) {
    std::sort(per[p].begin(), per[p].end(),
              [&](size_t a, size_t b) { return all[a].m.path < all[b].m.path; });
    PartitionWriter& w = *writers[p];
    w.Relabel(p, total, id);
    for (size_t i : per[p]) FANSTORE_RETURN_IF_ERROR(w.Add(all[i].m));
    auto sum = w.Finish();
    if (!sum.ok()) return sum.status();
    const std::string name = tmp + "/" + PartitionFileName(p);
    if (::rename(files[p].c_str(), name.c_str()) != 0) return Status::FromErrno(name, errno);
    manifest.bytes += sum->bytes;
    manifest.stored += sum->stored;
    stats.output_bytes += sum->file_size;
    manifest.partitions.push_back(*sum);
  }
  for (const Member& m : sorted) {  // (the root counts as a directory, as the tree packer's)
    if (m.kind == Kind::kFile) {
      ++stats.files;
      if (!StoredRaw(m.codec)) ++stats.compressed_members;
    } else if (m.kind == Kind::kDir) {
      ++stats.dirs;
    } else {
      ++stats.symlinks;
    }
  }
  pack_parts::FindRestricted(sorted, &stats);
  for (auto& g : groups) stats.skipped += g->skipped();
  stats.partitions = total;
  stats.sharded = sharded;
  manifest.files = stats.files;
  manifest.dirs = stats.dirs;
  manifest.symlinks = stats.symlinks;
  return stats;
}

}  // namespace fanstore::meta::archive_pack
