#include "meta/archive_group.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "meta/dir_reader.h"
#include "meta/glob.h"
#include "meta/pack_plan.h"
#include "meta/scan.h"

namespace fanstore::meta::archive_pack {
namespace fs = std::filesystem;
using pack_parts::Encoded;

namespace {

// A member's data read from its archive, for StreamLarge: one pass, no going back.
class EntryInput final : public pack_parts::LargeInput {
 public:
  EntryInput(EntryReader& r, std::string show) : r_(r), show_(std::move(show)) {}
  Result<size_t> Read(uint8_t* p, size_t n) override {
    size_t got = 0;
    while (got < n) {
      auto k = r_.ReadData(p + got, n - got);
      if (!k.ok()) return k.status();
      if (*k == 0) break;
      got += *k;
    }
    return got;
  }
  Result<bool> Rewind() override { return false; }
  Status CheckAtEnd() override { return Status::Ok(); }
  std::string Show() const override { return show_; }

 private:
  EntryReader& r_;
  std::string show_;
};

}  // namespace

GroupPacker::GroupPacker(const PackOptions& o, const std::string& tmp, uint32_t group,
                         const Group& g, unsigned threads, EncodePool& pool,
                         std::atomic<bool>& abort)
    : o_(o),
      tmp_(tmp),
      group_(group),
      threads_(threads),
      policy_(o.compress),
      own_(policy_.level()),
      pool_(pool),
      abort_(abort),
      as_root_(::geteuid() == 0) {
  cap_ = g.cap;
  target_ = g.target;
  Rec root;
  root.m.path = "";
  root.m.kind = Kind::kDir;
  root.m.mode = S_IFDIR | 0755;
  root.m.size = kDirSize;
  root.m.uid = ::getuid();
  root.m.gid = ::getgid();
  recs_.push_back(root);
  index_[""] = 0;
}

Status GroupPacker::Run(const Group& g) {
  for (size_t i = 0; i < g.sources.size(); ++i) {
    source_ = static_cast<uint32_t>(i);
    FANSTORE_RETURN_IF_ERROR(AddSource(g.sources[i]));
  }
  FANSTORE_RETURN_IF_ERROR(DrainAll());
  if (group_ == 0 && writers_.empty()) return OpenPart(0);  // partition 0 always exists
  return Status::Ok();
}

Status GroupPacker::AddSource(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Status::FromErrno(path, errno);
  source_mtime_ = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  if (recs_.size() == 1) recs_[0].m.mtime_ns = source_mtime_;
  std::string prefix = o_.prefix;
  std::unique_ptr<EntryReader> reader;
  if (S_ISDIR(st.st_mode)) {
    auto scan = ScanTree(path, [this](const std::string& w) { Warn(w); });
    if (!scan.ok()) return scan.status();
    skipped_ += scan->skipped;
    auto d = std::make_unique<DirReader>(path, std::move(*scan));
    FANSTORE_RETURN_IF_ERROR(d->Open());
    reader = std::move(d);
  } else {
    if (o_.keep_shard_dirs) {
      const std::string stem = StripArchiveSuffix(fs::path(path).filename().string());
      prefix = prefix.empty() ? stem : prefix + "/" + stem;
    }
    uint8_t head[8] = {};
    {
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) return Status::FromErrno(path, errno);
      const ssize_t n = ::pread(fd, head, sizeof head, 0);
      ::close(fd);
      if (n < 0) return Status::FromErrno(path, errno);
    }
    if (LooksLikeZip(head, sizeof head)) {
      auto z = OpenZipReader(path);
      if (!z.ok()) return z.status();
      reader = std::move(*z);
    } else {
      auto f = OpenFileSource(path);
      if (!f.ok()) return f.status();
      auto d = AutoDecompressed(std::move(*f));
      if (!d.ok()) return d.status();
      reader = NewTarReader(std::move(*d));
    }
  }
  FANSTORE_RETURN_IF_ERROR(CheckedPrefix(prefix, path));
  const uint64_t base = bytes_read_;
  auto tick = [&] { bytes_read_.store(base + reader->file_offset(), std::memory_order_relaxed); };
  FANSTORE_RETURN_IF_ERROR(ReadAll(*reader, prefix, 0, tick));
  bytes_read_ =
      base + static_cast<uint64_t>(S_ISDIR(st.st_mode) ? reader->file_offset() : st.st_size);
  return Status::Ok();
}

bool GroupPacker::IsBroadcast(const std::string& path) const {
  for (const std::string& g : o_.broadcast)
    if (GlobMatch(g, path)) return true;
  return false;
}

Status GroupPacker::CheckedPrefix(const std::string& prefix, const std::string& source) {
  if (prefix.empty()) return Status::Ok();
  std::string clean;
  for (std::string_view c : SplitPath(prefix)) {
    if (c == ".") continue;
    if (c == "..") return Status::Error("--prefix " + prefix + ": '..' is not allowed");
    clean += clean.empty() ? "" : "/";
    clean += c;
  }
  if (!clean.empty()) FANSTORE_RETURN_IF_ERROR(MakeDir(clean, nullptr, source, 0));
  return Status::Ok();
}

Result<std::string> GroupPacker::MemberPath(const std::string& raw, const std::string& prefix,
                                            const EntryReader& r, uint64_t at) {
  if (!raw.empty() && raw[0] == '/')
    return Status::Error(r.name() + ": member '" + ShownPath(raw) + "' (at byte " +
                         std::to_string(at) +
                         ") has an absolute path; refused, as tar x refuses it");
  std::string out = prefix;
  for (std::string_view c : SplitPath(raw)) {
    if (c == ".") continue;
    if (c == "..")
      return Status::Error(r.name() + ": member '" + ShownPath(raw) + "' (at byte " +
                           std::to_string(at) + ") contains '..'; refused, as tar x refuses it");
    out += out.empty() ? "" : "/";
    out += c;
  }
  if (out.size() > kMaxPathBytes || !IsValidMemberPath(out))
    return Status::Error(r.name() + ": member '" + ShownPath(raw) + "' (at byte " +
                         std::to_string(at) + ") has a name FanStore cannot store");
  return out;
}

Status GroupPacker::ReadAll(EntryReader& r, const std::string& prefix, int depth,
                            const std::function<void()>& tick) {
  ArchiveEntry e;
  for (;;) {
    auto more = r.Next(&e);
    if (!more.ok()) return more.status();
    if (!*more) return Status::Ok();
    if (abort_.load(std::memory_order_relaxed)) return Status::Error(kStopped);
    auto path = MemberPath(e.path, prefix, r, e.offset);
    if (!path.ok()) return path.status();
    if (path->empty() || *path == prefix) continue;  // "./": the root itself
    FANSTORE_RETURN_IF_ERROR(AddEntry(r, e, *path, prefix, depth, tick));
    tick();
  }
}

Status GroupPacker::AddEntry(EntryReader& r, const ArchiveEntry& e, const std::string& path,
                             const std::string& prefix, int depth,
                             const std::function<void()>& tick) {
  const std::string where = r.name() + ": '" + ShownPath(path) + "'";
  if (e.type == ArchiveEntry::kSpecial) {
    ++skipped_;
    Warn(where + ": a device, FIFO or socket; skipped");
    return Status::Ok();
  }
  FANSTORE_RETURN_IF_ERROR(MakeParents(path, r.name()));
  Member m;
  m.path = path;
  m.uid = as_root_ && e.has_owner ? e.uid : ::getuid();
  m.gid = as_root_ && e.has_owner ? e.gid : ::getgid();
  m.mtime_ns = e.mtime_ns;
  if (e.type == ArchiveEntry::kDir) {
    m.kind = Kind::kDir;
    m.mode = S_IFDIR | e.mode;
    m.size = e.size ? e.size : kDirSize;
    return MakeDir(path, &m, r.name(), e.offset);
  }
  if (o_.untar_nested && e.type == ArchiveEntry::kFile && HasTarSuffix(path)) {
    if (depth + 1 > kMaxNesting)
      return Status::Error(where + ": tars nested deeper than " + std::to_string(kMaxNesting));
    const std::string dir = StripArchiveSuffix(path);
    Member d = m;
    d.path = dir;
    d.kind = Kind::kDir;
    d.mode = S_IFDIR | 0755;
    d.size = kDirSize;
    FANSTORE_RETURN_IF_ERROR(MakeDir(dir, &d, r.name(), e.offset));
    auto src = AutoDecompressed(EntryDataSource(r, path));
    if (!src.ok()) return src.status();
    auto inner = NewTarReader(std::move(*src));
    return ReadAll(*inner, dir, depth + 1, tick);
  }
  // A name seen before: the later member wins, as tar x replaces the file.
  auto it = index_.find(path);
  if (it != index_.end()) {
    Rec& old = recs_[it->second];
    if (old.m.kind == Kind::kDir && HasChildren(path))
      return Status::Error(where + " (at byte " + std::to_string(e.offset) +
                           ") replaces a directory that is not empty");
    Warn(where + " appears again at byte " + std::to_string(e.offset) +
         "; the later one wins, as with tar x");
    old.live = false;
    index_.erase(it);
  }
  Rec rec;
  if (e.type == ArchiveEntry::kSymlink) {
    rec.m = m;
    rec.m.kind = Kind::kSymlink;
    rec.m.mode = S_IFLNK | 0777;
    rec.m.target = e.link;
    rec.m.size = e.link.size();
    if (e.link.empty() || e.link.size() > kMaxPathBytes)
      return Status::Error(where + ": a symlink with an empty or overlong target");
    auto part = PartFor(path, 0);
    if (!part.ok()) return part.status();
    rec.part = *part;
    Insert(std::move(rec));
    return Status::Ok();
  }
  if (e.type == ArchiveEntry::kHardlink) {
    auto target = MemberPath(e.link, prefix, r, e.offset);
    if (!target.ok()) return target.status();
    auto t = index_.find(*target);
    if (t == index_.end()) {  // perhaps in an earlier group's archive: the merge decides
      rec.m = m;
      rec.m.kind = Kind::kFile;
      rec.m.mode = S_IFREG | e.mode;
      rec.link_path = *target;
      rec.m.target = r.name() + ": '" + ShownPath(path) + "' (at byte " + std::to_string(e.offset) +
                     ")";  // (for the merge's error only)
      ++files_;
      Insert(std::move(rec));
      return Status::Ok();
    }
    if (recs_[t->second].m.kind != Kind::kFile)
      return Status::Error(where + " (at byte " + std::to_string(e.offset) +
                           ") is a hard link to '" + ShownPath(*target) +
                           "', which is not a file before it in the archive");
    const size_t ti = recs_[t->second].link_to != SIZE_MAX ? recs_[t->second].link_to : t->second;
    rec.m = recs_[ti].m;
    rec.m.path = path;
    rec.link_to = ti;
    rec.part = recs_[ti].part;
    ++files_;
    Insert(std::move(rec));
    return Status::Ok();
  }
  rec.m = m;
  rec.m.kind = Kind::kFile;
  rec.m.mode = S_IFREG | e.mode;
  rec.m.size = e.size;
  auto part = PartFor(path, e.size);
  if (!part.ok()) return part.status();
  rec.part = *part;
  ++files_;
  const size_t idx = Insert(std::move(rec));
  if (e.size == 0) return Status::Ok();
  if (e.size <= kStreamThreshold) {
    std::vector<uint8_t> raw(e.size);
    EntryInput in(r, where);
    auto got = in.Read(raw.data(), raw.size());
    if (!got.ok()) return got.status();
    if (*got != e.size) return Status::Error(where + ": ends before its size");
    while (pending_.size() >= 4 * static_cast<size_t>(threads_))
      FANSTORE_RETURN_IF_ERROR(DrainOne());
    pending_.emplace_back(pool_.Submit(std::move(raw)), idx);
    return Status::Ok();
  }
  FANSTORE_RETURN_IF_ERROR(DrainAll());
  Rec& big = recs_[idx];
  EntryInput in(r, where);
  return pack_parts::StreamLarge(in, big.m, policy_, own_, Writer(big.part), big.m, threads_);
}

size_t GroupPacker::Insert(Rec rec) {
  rec.source = source_;
  const size_t i = recs_.size();
  index_[rec.m.path] = i;
  recs_.push_back(std::move(rec));
  return i;
}

bool GroupPacker::HasChildren(const std::string& dir) {
  // Directories are few next to files; a member below `dir` keeps it as a parent.
  return parents_with_children_.count(dir) > 0;
}

Status GroupPacker::MakeDir(const std::string& path, const Member* m, const std::string& archive,
                            uint64_t at) {
  auto it = index_.find(path);
  if (it != index_.end()) {
    Rec& old = recs_[it->second];
    if (old.m.kind == Kind::kDir) {
      if (m) {
        old.m = *m;
        old.implicit = false;
      }
      return Status::Ok();
    }
    if (m == nullptr)
      return Status::Error(archive + ": '" + ShownPath(path) +
                           "' is a file, and a later member needs it to be a directory");
    Warn(archive + ": '" + ShownPath(path) + "' appears again at byte " + std::to_string(at) +
         " as a directory; the later one wins, as with tar x");
    old.live = false;
    index_.erase(it);
  }
  Rec d;
  if (m) {
    d.m = *m;
  } else {
    d.m.path = path;
    d.m.kind = Kind::kDir;
    d.m.mode = S_IFDIR | 0755;
    d.m.size = kDirSize;
    d.m.uid = ::getuid();
    d.m.gid = ::getgid();
    d.m.mtime_ns = source_mtime_;
    d.implicit = true;
  }
  Insert(std::move(d));
  return Status::Ok();
}

Status GroupPacker::MakeParents(const std::string& path, const std::string& archive) {
  std::string_view p = ParentPath(path);
  if (p.empty()) return Status::Ok();
  if (parents_with_children_.count(std::string(p))) {
    auto it = index_.find(std::string(p));
    if (it != index_.end() && recs_[it->second].m.kind == Kind::kDir) return Status::Ok();
  }
  FANSTORE_RETURN_IF_ERROR(MakeParents(std::string(p), archive));
  FANSTORE_RETURN_IF_ERROR(MakeDir(std::string(p), nullptr, archive, 0));
  parents_with_children_.insert(std::string(p));
  return Status::Ok();
}

Result<uint32_t> GroupPacker::PartFor(const std::string& path, uint64_t size) {
  if (IsBroadcast(path)) {
    FANSTORE_RETURN_IF_ERROR(EnsureWriter(kBroadcastPart));
    return kBroadcastPart;
  }
  if (cur_bytes_ >= target_ && cur_has_file_ && cur_ + 1 < cap_) {
    ++cur_;
    cur_bytes_ = 0;
    cur_has_file_ = false;
  }
  cur_bytes_ += size;
  cur_has_file_ = cur_has_file_ || size > 0;
  FANSTORE_RETURN_IF_ERROR(EnsureWriter(cur_));
  return cur_;
}

Status GroupPacker::OpenPart(uint32_t p) {
  while (writers_.size() <= p) {
    auto w = std::make_unique<PartitionWriter>();
    const uint32_t id = static_cast<uint32_t>(writers_.size());
    FANSTORE_RETURN_IF_ERROR(w->Open(
        tmp_ + "/g" + std::to_string(group_) + "-" + std::to_string(id) + ".partial", id, 0, 0, 0));
    writers_.push_back(std::move(w));
  }
  return Status::Ok();
}

PartitionWriter& GroupPacker::Writer(uint32_t part) {
  if (part == kBroadcastPart) return *bcast_;
  return *writers_[part];
}

Status GroupPacker::EnsureWriter(uint32_t part) {
  if (part != kBroadcastPart) return OpenPart(part);
  if (!bcast_) {
    bcast_ = std::make_unique<PartitionWriter>();
    FANSTORE_RETURN_IF_ERROR(bcast_->Open(tmp_ + "/broadcast.partial", 0, 0, kFlagBroadcast, 0));
  }
  return Status::Ok();
}

Status GroupPacker::DrainOne() {
  auto job = std::move(pending_.front().first);
  const size_t idx = pending_.front().second;
  pending_.pop_front();
  Encoded e = pool_.Take(*job);
  if (!e.status.ok()) return e.status;
  Rec& r = recs_[idx];
  PartitionWriter& w = Writer(r.part);
  auto off = w.BeginData(e.codec, e.bytes.size());
  if (!off.ok()) return off.status();
  r.m.data_offset = *off;
  r.m.stored_size = e.bytes.size();
  r.m.codec = e.codec;
  r.m.crc32c = e.crc;
  return w.Write(e.bytes);
}

Status GroupPacker::DrainAll() {
  while (!pending_.empty()) FANSTORE_RETURN_IF_ERROR(DrainOne());
  return Status::Ok();
}

}  // namespace fanstore::meta::archive_pack
