#include "meta/dataset.h"

#include <sys/stat.h>

#include <algorithm>

namespace fanstore::meta {

Status CheckAgainstManifest(const PartitionReader& p, const Manifest& m, uint32_t id) {
  const PartitionSummary& s = m.partitions[id];
  const PartitionHeader& h = p.header();
  if (h.dataset_id != m.dataset_id)
    return Status::Error(p.name() + ": belongs to another dataset (dataset id differs)");
  if (h.partition_id != id || h.partition_count != m.partitions.size())
    return Status::Error(p.name() + ": partition id/count differ from the manifest");
  if (p.file_size() != s.file_size || p.footer().index_crc != s.index_crc ||
      h.member_count != s.members || h.flags != s.flags)
    return Status::Error(p.name() + ": does not match the manifest (size, index or flags)");
  return Status::Ok();
}

Result<std::unique_ptr<Dataset>> Dataset::Open(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return Status::FromErrno(dir, errno);
  if (!S_ISDIR(st.st_mode))
    return Status::Error(dir + ": not a directory (expected a packed dataset)");
  auto m = Manifest::Load(dir);
  if (!m.ok()) return m.status();
  auto ds = std::make_unique<Dataset>();
  ds->dir_ = dir;
  ds->manifest_ = std::move(m.value());
  const uint32_t n = static_cast<uint32_t>(ds->manifest_.partitions.size());
  ds->parts_.reserve(n);
  size_t total = 0;
  for (uint32_t i = 0; i < n; ++i) {
    PartitionReader r;
    FANSTORE_RETURN_IF_ERROR(r.Open(dir + "/" + PartitionFileName(i)));
    FANSTORE_RETURN_IF_ERROR(CheckAgainstManifest(r, ds->manifest_, i));
    total += r.size();
    ds->parts_.push_back(std::move(r));
  }
  ds->by_path_.reserve(total);
  for (uint32_t p = 0; p < n; ++p) {
    const PartitionReader& r = ds->parts_[p];
    for (uint32_t i = 0; i < r.size(); ++i) {
      const MemberView v = r.member(i);
      auto [it, inserted] = ds->by_path_.try_emplace(v.path, MemberRef{p, i});
      if (!inserted) {
        if (v.kind() == Kind::kDir && ds->View(it->second).kind() == Kind::kDir) continue;
        return Status::Error(r.name() + ": member '" + std::string(v.path) + "' also stored in " +
                             ds->parts_[it->second.partition].name());
      }
    }
  }
  if (!ds->by_path_.contains(std::string_view()))
    return Status::Error(dir + ": no root directory in any partition");
  for (const auto& [path, ref] : ds->by_path_) {
    if (path.empty()) continue;
    const std::string_view parent = ParentPath(path);
    const MemberRef* pr = ds->Lookup(parent);
    if (!pr || ds->View(*pr).kind() != Kind::kDir)
      return Status::Error(ds->parts_[ref.partition].name() + ": member '" + std::string(path) +
                           "' has no parent directory");
    ds->children_[parent].push_back(ref);
  }
  for (auto it = ds->children_.begin(); it != ds->children_.end(); ++it) {
    auto& v = it.value();
    std::sort(v.begin(), v.end(), [&](const MemberRef& a, const MemberRef& b) {
      return ds->View(a).path < ds->View(b).path;
    });
  }
  return ds;
}

const MemberRef* Dataset::Lookup(std::string_view path) const {
  while (!path.empty() && path.front() == '/') path.remove_prefix(1);
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  auto it = by_path_.find(path);
  return it == by_path_.end() ? nullptr : &it->second;
}

const MemberRef* Dataset::Resolve(std::string_view path, bool follow_last) const {
  std::vector<std::string> todo;  // remaining components, last first
  auto push_path = [&](std::string_view p) {
    const std::vector<std::string_view> comps = SplitPath(p);
    for (auto it = comps.rbegin(); it != comps.rend(); ++it) todo.emplace_back(*it);
  };
  push_path(path);
  std::string cur;  // resolved so far
  int hops = 0;
  const std::string& source = manifest_.source;
  while (!todo.empty()) {
    const std::string comp = std::move(todo.back());
    todo.pop_back();
    if (comp == ".") continue;
    if (comp == "..") {
      cur = std::string(ParentPath(cur));
      continue;
    }
    std::string next = cur.empty() ? comp : cur + "/" + comp;
    const MemberRef* ref = Lookup(next);
    if (!ref) return nullptr;
    const MemberView v = View(*ref);
    if (v.kind() == Kind::kSymlink && (follow_last || !todo.empty())) {
      if (++hops > 40) return nullptr;
      std::string_view t = v.target;
      if (!t.empty() && t.front() == '/') {
        if (t.substr(0, source.size()) != source ||
            (t.size() > source.size() && t[source.size()] != '/'))
          return nullptr;
        t.remove_prefix(source.size());
        cur.clear();
      }
      push_path(t);
      continue;
    }
    if (v.kind() != Kind::kDir && !todo.empty()) return nullptr;
    cur = std::move(next);
  }
  return Lookup(cur);
}

const std::vector<MemberRef>& Dataset::Children(std::string_view dir_path) const {
  static const std::vector<MemberRef> kNone;
  while (!dir_path.empty() && dir_path.front() == '/') dir_path.remove_prefix(1);
  while (!dir_path.empty() && dir_path.back() == '/') dir_path.remove_suffix(1);
  auto it = children_.find(dir_path);
  return it == children_.end() ? kNone : it->second;
}

}  // namespace fanstore::meta
