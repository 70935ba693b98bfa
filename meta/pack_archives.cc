// The archive packer: packs tar and zip archives (and directories among them) in one pass
// over each, with no extraction. Members arrive in archive order, not path order, so:
//  - partitions are filled in arrival order, a new one begun when the current one holds
//    its share of bytes, so each is a run of whole directories as an archive lists them;
//  - a member's data is written to its partition as it arrives (small ones checksummed and
//    compressed on the worker threads, written in arrival order), and the index records
//    are kept in memory and added in path order when the partition is finished;
//  - the partition count, and so the dataset id in every header, are known at the end
//    (PartitionWriter::Relabel).
// Consecutive sources are cut into groups (MakeGroups), each read by one thread into
// partitions of its own; the groups' records are merged in source order at the end (Merge).
// The namespace is what `tar x` (or `unzip`) of the sources, in order, into an empty
// directory would make: missing parent directories are made (0755, the archive's mtime),
// a later member of the same name replaces the earlier (with a warning), absolute paths
// and ".." are refused, devices and FIFOs are skipped with a warning. Owners are the
// archive's when packing as root, else the packing user's (as tar x does).
#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "meta/archive_reader.h"
#include "meta/glob.h"
#include "meta/pack_parts.h"
#include "meta/pack_plan.h"
#include "meta/scan.h"

namespace fanstore::meta {
namespace fs = std::filesystem;
using pack_parts::Encoded;
using pack_parts::Policy;

namespace {

constexpr int kMaxNesting = 8;
// What a group returns when another group's failure stopped it (not shown to the user).
constexpr const char* kStopped = "stopped: another source failed";
// The size a directory made from an archive reports: what ext4 and XFS report for one
// extracted there (a tree packed from disk keeps the size its file system gave).
constexpr uint64_t kDirSize = 4096;

// The archive suffixes, longest first; a name ending so is an archive of that kind.
constexpr const char* kTarSuffixes[] = {".tar.gz", ".tar.zst", ".tar.xz", ".tgz",
                                        ".tzst",   ".txz",     ".tar"};

std::string StripArchiveSuffix(const std::string& name) {
  for (const char* s : kTarSuffixes) {
    const size_t n = std::strlen(s);
    if (name.size() > n && name.compare(name.size() - n, n, s) == 0)
      return name.substr(0, name.size() - n);
  }
  if (name.size() > 4 && name.compare(name.size() - 4, 4, ".zip") == 0)
    return name.substr(0, name.size() - 4);
  return name;
}

bool HasTarSuffix(const std::string& name) {
  for (const char* s : kTarSuffixes) {
    const size_t n = std::strlen(s);
    if (name.size() > n && name.compare(name.size() - n, n, s) == 0) return true;
  }
  return false;
}

// Checksums and compresses whole members on worker threads, for every reader at once;
// each reader takes its results back in the order it handed them over, so the output does
// not depend on the thread count.
class EncodePool {
 public:
  EncodePool(unsigned threads, const CompressMode& mode) : policy_(mode) {
    for (unsigned t = 0; t < threads; ++t) workers_.emplace_back([this] { Work(); });
  }
  ~EncodePool() {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    work_cv_.notify_all();
    for (std::thread& t : workers_) t.join();
  }
  struct Job {
    std::vector<uint8_t> raw;
    Encoded out;
    bool done = false;
  };
  // Hands a whole member to a worker. The caller owns the job and must Take it (which
  // waits for the worker) before letting it go.
  std::unique_ptr<Job> Submit(std::vector<uint8_t> raw) {
    auto job = std::make_unique<Job>();
    job->raw = std::move(raw);
    std::lock_guard lk(mu_);
    todo_.push_back(job.get());
    work_cv_.notify_one();
    return job;
  }
  Encoded Take(Job& job) {
    std::unique_lock lk(mu_);
    done_cv_.wait(lk, [&] { return job.done; });
    return std::move(job.out);
  }

 private:
  void Work() {
    compress::Deflater d(policy_.level());
    for (;;) {
      Job* job;
      {
        std::unique_lock lk(mu_);
        work_cv_.wait(lk, [&] { return stop_ || !todo_.empty(); });
        if (stop_) return;
        job = todo_.front();
        todo_.pop_front();
      }
      Encoded e = pack_parts::EncodeBytes(std::move(job->raw), policy_, d);
      std::lock_guard lk(mu_);
      job->out = std::move(e);
      job->done = true;
      done_cv_.notify_all();
    }
  }
  Policy policy_;
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<Job*> todo_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

// A directory among the sources, read as an archive of its tree in path order.
class DirReader final : public EntryReader {
 public:
  DirReader(std::string root, ScanResult scan) : root_(std::move(root)), scan_(std::move(scan)) {}
  ~DirReader() override {
    Close();
    if (rootfd_ >= 0) ::close(rootfd_);
  }
  Status Open() {
    rootfd_ = ::open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rootfd_ < 0) return Status::FromErrno(root_, errno);
    return Status::Ok();
  }
  Result<bool> Next(ArchiveEntry* e) override {
    Close();
    if (++i_ >= scan_.members.size()) return false;
    const Member& m = scan_.members[i_];
    e->path = m.path;
    e->type = m.kind == Kind::kDir       ? ArchiveEntry::kDir
              : m.kind == Kind::kSymlink ? ArchiveEntry::kSymlink
                                         : ArchiveEntry::kFile;
    e->link = m.target;
    e->mode = m.mode & 07777;
    e->uid = m.uid;
    e->gid = m.gid;
    e->mtime_ns = m.mtime_ns;
    e->size = m.size;
    e->offset = 0;
    e->has_owner = true;
    left_ = m.kind == Kind::kFile ? m.size : 0;
    if (left_ > 0) {
      fd_ = OpenRelative(rootfd_, m.path, O_RDONLY | O_NOFOLLOW);
      if (fd_ < 0) return Status::FromErrno(root_ + "/" + m.path, -fd_);
    }
    return true;
  }
  Result<size_t> ReadData(uint8_t* p, size_t n) override {
    if (left_ == 0 || n == 0) return size_t{0};
    const Member& m = scan_.members[i_];
    for (;;) {
      const ssize_t r = ::read(fd_, p, std::min<uint64_t>(n, left_));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return Status::FromErrno(root_ + "/" + m.path, errno);
      if (r == 0)
        return Status::Error(root_ + "/" + m.path + ": file changed while packing (it shrank)");
      left_ -= static_cast<uint64_t>(r);
      done_ += static_cast<uint64_t>(r);
      return static_cast<size_t>(r);
    }
  }
  uint64_t file_offset() const override { return done_; }
  const std::string& name() const override { return root_; }

 private:
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  std::string root_;
  ScanResult scan_;
  int rootfd_ = -1, fd_ = -1;
  size_t i_ = 0;  // [0] is the root, skipped
  uint64_t left_ = 0, done_ = 0;
};

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

// One member of the namespace being built.
struct Rec {
  Member m;
  uint32_t part = 0;          // files and symlinks: the group's partition holding the record
  bool live = true;           // false once a later member of the same name replaced it
  bool implicit = false;      // a directory made because a member lay below it
  size_t link_to = SIZE_MAX;  // a hard link: the record (of its group) whose data it shares
  std::string link_path;      // a hard link to a name of an earlier group: resolved on merge
  uint32_t source = 0;        // index of its source in the group
};

constexpr uint32_t kBroadcastPart = UINT32_MAX;

// A run of consecutive sources read by one thread into partitions of its own: `cap`
// partitions at most, a new one begun when the current one holds `target` bytes.
struct Group {
  std::vector<std::string> sources;
  uint64_t bytes = 0;  // estimated
  uint32_t cap = 1;
  uint64_t target = 0;
};

// Reads one group's sources, in order, into its partitions; keeps the records (its part
// of the namespace, in arrival order) for the merge. Warnings are kept, to be shown in
// source order whatever thread ran first.
class GroupPacker {
 public:
  GroupPacker(const PackOptions& o, const std::string& tmp, uint32_t group, const Group& g,
              unsigned threads, EncodePool& pool, std::atomic<bool>& abort)
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

  ~GroupPacker() {
    for (auto& p : pending_) pool_.Take(*p.first);  // (a worker may still hold it)
  }

  Status Run(const Group& g) {
    for (size_t i = 0; i < g.sources.size(); ++i) {
      source_ = static_cast<uint32_t>(i);
      FANSTORE_RETURN_IF_ERROR(AddSource(g.sources[i]));
    }
    FANSTORE_RETURN_IF_ERROR(DrainAll());
    if (group_ == 0 && writers_.empty()) return OpenPart(0);  // partition 0 always exists
    return Status::Ok();
  }

  std::vector<Rec>& recs() { return recs_; }
  std::vector<std::unique_ptr<PartitionWriter>>& writers() { return writers_; }
  std::unique_ptr<PartitionWriter>& bcast() { return bcast_; }
  const std::vector<std::string>& warnings() const { return warnings_; }
  uint64_t skipped() const { return skipped_; }
  uint64_t bytes_read() const { return bytes_read_.load(std::memory_order_relaxed); }
  uint64_t files() const { return files_.load(std::memory_order_relaxed); }

 private:
  void Warn(std::string w) { warnings_.push_back(std::move(w)); }

  // Reads one source (archive or directory) to its end.
  Status AddSource(const std::string& path) {
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

  bool IsBroadcast(const std::string& path) const {
    for (const std::string& g : o_.broadcast)
      if (GlobMatch(g, path)) return true;
    return false;
  }

  Status CheckedPrefix(const std::string& prefix, const std::string& source) {
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

  // The member path of an archive name under `prefix`, or an error naming the archive.
  Result<std::string> MemberPath(const std::string& raw, const std::string& prefix,
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

  Status ReadAll(EntryReader& r, const std::string& prefix, int depth,
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

  Status AddEntry(EntryReader& r, const ArchiveEntry& e, const std::string& path,
                  const std::string& prefix, int depth, const std::function<void()>& tick) {
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
        rec.m.target = r.name() + ": '" + ShownPath(path) + "' (at byte " +
                       std::to_string(e.offset) + ")";  // (for the merge's error only)
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

  size_t Insert(Rec rec) {
    rec.source = source_;
    const size_t i = recs_.size();
    index_[rec.m.path] = i;
    recs_.push_back(std::move(rec));
    return i;
  }

  bool HasChildren(const std::string& dir) {
    // Directories are few next to files; a member below `dir` keeps it as a parent.
    return parents_with_children_.count(dir) > 0;
  }

  // Makes or updates the directory `path` (`m` null: an implicit one, default attributes).
  Status MakeDir(const std::string& path, const Member* m, const std::string& archive,
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

  Status MakeParents(const std::string& path, const std::string& archive) {
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

  // The partition of a new file or symlink: the broadcast one if a glob names it, else the
  // current one, or the next when the current holds its share and at least one file.
  Result<uint32_t> PartFor(const std::string& path, uint64_t size) {
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

  Status OpenPart(uint32_t p) {
    while (writers_.size() <= p) {
      auto w = std::make_unique<PartitionWriter>();
      const uint32_t id = static_cast<uint32_t>(writers_.size());
      FANSTORE_RETURN_IF_ERROR(
          w->Open(tmp_ + "/g" + std::to_string(group_) + "-" + std::to_string(id) + ".partial", id,
                  0, 0, 0));
      writers_.push_back(std::move(w));
    }
    return Status::Ok();
  }

  PartitionWriter& Writer(uint32_t part) {
    if (part == kBroadcastPart) return *bcast_;
    return *writers_[part];
  }

  Status EnsureWriter(uint32_t part) {
    if (part != kBroadcastPart) return OpenPart(part);
    if (!bcast_) {
      bcast_ = std::make_unique<PartitionWriter>();
      FANSTORE_RETURN_IF_ERROR(bcast_->Open(tmp_ + "/broadcast.partial", 0, 0, kFlagBroadcast, 0));
    }
    return Status::Ok();
  }

  Status DrainOne() {
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

  Status DrainAll() {
    while (!pending_.empty()) FANSTORE_RETURN_IF_ERROR(DrainOne());
    return Status::Ok();
  }

  const PackOptions& o_;
  const std::string& tmp_;
  uint32_t group_;
  unsigned threads_;
  Policy policy_;
  compress::Deflater own_;
  EncodePool& pool_;
  std::atomic<bool>& abort_;
  bool as_root_;
  uint32_t source_ = 0;
  std::vector<std::string> warnings_;
  std::atomic<uint64_t> bytes_read_{0}, files_{0};
  uint32_t cap_ = 1, cur_ = 0;
  uint64_t target_ = 0, cur_bytes_ = 0;
  bool cur_has_file_ = false;
  std::vector<Rec> recs_;
  std::unordered_map<std::string, size_t> index_;
  std::unordered_set<std::string> parents_with_children_;
  std::deque<std::pair<std::unique_ptr<EncodePool::Job>, size_t>> pending_;
  std::vector<std::unique_ptr<PartitionWriter>> writers_;
  std::unique_ptr<PartitionWriter> bcast_;
  int64_t source_mtime_ = 0;
  uint64_t skipped_ = 0;
};

// Expands the first "{A..B}" of `p` (numbers; the width of A kept when it has leading
// zeros), recursively for the rest.
Status ExpandBraces(const std::string& p, std::vector<std::string>& out) {
  const size_t open = p.find('{');
  const size_t dots = open == std::string::npos ? open : p.find("..", open);
  const size_t close = dots == std::string::npos ? dots : p.find('}', dots);
  if (close == std::string::npos) {
    out.push_back(p);
    return Status::Ok();
  }
  const std::string a = p.substr(open + 1, dots - open - 1);
  const std::string b = p.substr(dots + 2, close - dots - 2);
  auto number = [](const std::string& s, uint64_t* v) {
    if (s.empty() || s.size() > 18) return false;
    for (char c : s)
      if (c < '0' || c > '9') return false;
    *v = std::stoull(s);
    return true;
  };
  uint64_t lo, hi;
  if (!number(a, &lo) || !number(b, &hi)) {
    out.push_back(p);  // not a numeric range: left for the glob
    return Status::Ok();
  }
  if (hi < lo || hi - lo > 10'000'000)
    return Status::Error(p + ": the range {" + a + ".." + b + "} is empty or too large");
  const size_t width = a.size() > 1 && a[0] == '0' ? a.size() : 0;
  for (uint64_t v = lo; v <= hi; ++v) {
    std::string n = std::to_string(v);
    if (n.size() < width) n.insert(0, width - n.size(), '0');
    FANSTORE_RETURN_IF_ERROR(ExpandBraces(p.substr(0, open) + n + p.substr(close + 1), out));
  }
  return Status::Ok();
}

// Cuts the sources into groups read in parallel (the output depends on the sources and
// options only, never on the thread count):
//  - with --broadcast, one group (the broadcast partition is one, written in order);
//  - with --partitions N, min(N, sources) runs of about equal estimated bytes (a source
//    goes to the run holding its midpoint), the N partitions shared out among them in
//    proportion to their bytes, at least one each;
//  - else runs of at least 256 MiB, each cut into partitions of 256 MiB.
// A source's estimate is its file size (a directory's: 0).
std::vector<Group> MakeGroups(const std::vector<std::string>& sources,
                              const std::vector<uint64_t>& sizes, const PackOptions& o) {
  uint64_t total = 0;
  for (uint64_t b : sizes) total += b;
  std::vector<Group> groups;
  if (!o.broadcast.empty()) {
    Group g;
    g.sources = sources;
    g.bytes = total;
    g.cap = o.partitions ? o.partitions : kMaxShardedPartitions;
    g.target = o.partitions ? std::max<uint64_t>(1, (total + o.partitions - 1) / o.partitions)
                            : kDefaultPartitionBytes;
    groups.push_back(g);
    return groups;
  }
  if (o.partitions) {
    const uint64_t n = std::min<uint64_t>(o.partitions, sources.size());
    std::vector<Group> runs(n);
    uint64_t before = 0;
    for (size_t k = 0; k < sources.size(); ++k) {
      const uint64_t g =
          total ? std::min<uint64_t>(
                      n - 1, static_cast<uint64_t>(
                                 (static_cast<long double>(before) + sizes[k] / 2.0) * n / total))
                : k * n / sources.size();
      runs[g].sources.push_back(sources[k]);
      runs[g].bytes += sizes[k];
      before += sizes[k];
    }
    for (Group& g : runs)
      if (!g.sources.empty()) groups.push_back(std::move(g));
    // At least one partition each; the rest by the largest remainder of their share.
    uint32_t left = o.partitions - static_cast<uint32_t>(groups.size());
    std::vector<std::pair<long double, size_t>> rem;
    uint32_t given = 0;
    for (size_t i = 0; i < groups.size(); ++i) {
      const long double share = total ? static_cast<long double>(left) * groups[i].bytes / total
                                      : static_cast<long double>(left) / groups.size();
      const uint32_t whole = static_cast<uint32_t>(share);
      groups[i].cap = 1 + whole;
      given += whole;
      rem.emplace_back(share - whole, i);
    }
    std::stable_sort(rem.begin(), rem.end(), [](auto& a, auto& b) { return a.first > b.first; });
    for (size_t i = 0; given < left; ++i, ++given) ++groups[rem[i % rem.size()].second].cap;
    for (Group& g : groups) g.target = std::max<uint64_t>(1, (g.bytes + g.cap - 1) / g.cap);
    return groups;
  }
  for (size_t k = 0; k < sources.size(); ++k) {
    if (groups.empty() || groups.back().bytes >= kDefaultPartitionBytes) groups.emplace_back();
    groups.back().sources.push_back(sources[k]);
    groups.back().bytes += sizes[k];
  }
  for (Group& g : groups) {
    g.cap = kMaxShardedPartitions;
    g.target = kDefaultPartitionBytes;
  }
  return groups;
}

// One member of the merged namespace.
struct Entry {
  Member m;
  uint32_t part = 0;  // global partition id (kBroadcastPart for the broadcast one)
  bool live = true;
  bool implicit = false;
};

// Merges the groups' records in source order, as tar x of the sources one after another
// would: a later member replaces an earlier one of the same name, directories merge.
// Then places every member and directory as the tree packer does, finishes the
// partitions (relabelled and renamed to their final ids) and fills the manifest.
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
      if (m.codec != Codec::kRaw) ++stats.compressed_members;
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

}  // namespace

Result<std::vector<std::string>> ExpandSources(const std::vector<std::string>& patterns) {
  std::vector<std::string> out;
  for (const std::string& pat : patterns) {
    std::vector<std::string> braced;
    FANSTORE_RETURN_IF_ERROR(ExpandBraces(pat, braced));
    for (const std::string& p : braced) {
      if (p.find_first_of("*?[") == std::string::npos) {
        out.push_back(p);
        continue;
      }
      glob_t g{};
      const int rc = ::glob(p.c_str(), 0, nullptr, &g);
      if (rc == GLOB_NOMATCH) {
        ::globfree(&g);
        return Status::Error(p + ": matches no file");
      }
      if (rc != 0) {
        ::globfree(&g);
        return Status::Error(p + ": cannot expand the pattern");
      }
      for (size_t i = 0; i < g.gl_pathc; ++i) out.push_back(g.gl_pathv[i]);
      ::globfree(&g);
    }
  }
  return out;
}

namespace pack_parts {

Result<PackStats> PackArchives(const PackOptions& in) {
  const auto t0 = std::chrono::steady_clock::now();
  auto expanded = ExpandSources(in.sources);
  if (!expanded.ok()) return expanded.status();
  PackOptions o = in;
  o.sources = *expanded;
  if (o.sources.empty()) return Status::Error("pack: no source given");
  std::vector<std::string> abs;
  std::vector<uint64_t> sizes;
  bool only_dir = o.sources.size() == 1 && o.prefix.empty();
  for (const std::string& s : o.sources) {
    struct stat st;
    if (::stat(s.c_str(), &st) != 0) return Status::FromErrno(s, errno);
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
      return Status::Error(s + ": not a directory, tar or zip archive");
    only_dir = only_dir && S_ISDIR(st.st_mode);
    std::error_code ec;
    abs.push_back(fs::canonical(s, ec).string());
    if (ec) return Status::Error(s + ": " + ec.message());
    sizes.push_back(S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0);
  }
  if (only_dir) {  // one tree: the tree packer, which cuts partitions in path order
    o.src = o.sources[0];
    o.sources.clear();
    return Pack(o);
  }
  std::string out;
  FANSTORE_RETURN_IF_ERROR(CheckOutput(o, abs, &out));
  const std::string tmp = out + ".fanstore-partial-" + std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  // Private until the modes are known; opened below if every member may be read by all.
  if (::mkdir(tmp.c_str(), 0700) != 0) return Status::FromErrno(tmp, errno);

  const unsigned threads =
      o.threads ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  Manifest manifest;
  // The default mount point: where `tar x` beside the first archive would put it.
  {
    struct stat st;
    const bool dir = ::stat(abs[0].c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    manifest.source = dir ? abs[0] : StripArchiveSuffix(abs[0]);
  }
  manifest.compress = o.compress.ToString();
  std::string salt = "archives;compress=" + o.compress.ToString() + ";prefix=" + o.prefix +
                     ";nested=" + std::to_string(o.untar_nested) +
                     ";shard_dirs=" + std::to_string(o.keep_shard_dirs);
  for (const std::string& g : o.broadcast) salt += ";bcast=" + g;
  for (const std::string& s : abs) salt += ";from=" + fs::path(s).filename().string();

  const std::vector<Group> plan = MakeGroups(abs, sizes, o);
  Result<PackStats> result = Status::Error("pack: not run");
  {
    EncodePool pool(threads, o.compress);
    std::atomic<bool> abort{false};
    std::vector<std::unique_ptr<GroupPacker>> groups;
    for (uint32_t g = 0; g < plan.size(); ++g)
      groups.push_back(std::make_unique<GroupPacker>(o, tmp, g, plan[g], threads, pool, abort));
    // One reader thread per group at a time, as many as there are threads.
    std::vector<Status> status(plan.size());
    std::atomic<size_t> next{0};
    std::atomic<unsigned> running{0};
    std::vector<std::thread> readers;
    const size_t nreaders = std::min<size_t>(plan.size(), threads);
    running = static_cast<unsigned>(nreaders);
    for (size_t t = 0; t < nreaders; ++t)
      readers.emplace_back([&] {
        for (size_t g; (g = next.fetch_add(1)) < plan.size();) {
          status[g] = groups[g]->Run(plan[g]);
          if (!status[g].ok()) abort = true;
        }
        --running;
      });
    PackProgress prog;
    for (uint64_t b : sizes) prog.bytes_total += b;
    while (running.load() > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      prog.bytes_done = prog.files_done = 0;
      for (auto& g : groups) {
        prog.bytes_done += g->bytes_read();
        prog.files_done += g->files();
      }
      if (o.progress) o.progress(prog);
    }
    for (std::thread& t : readers) t.join();
    // Warnings in source order; the first failure in source order (not "stopped").
    Status failed;
    for (size_t g = 0; g < plan.size(); ++g) {
      if (o.warn)
        for (const std::string& w : groups[g]->warnings()) o.warn(w);
      if (!status[g].ok() && failed.ok() && status[g].message() != kStopped) failed = status[g];
    }
    result = failed.ok() ? Merge(groups, plan, o, tmp, salt, manifest) : Result<PackStats>(failed);
  }
  if (!result.ok()) {
    fs::remove_all(tmp, ec);
    return result.status();
  }
  PackStats& stats = *result;
  stats.partitions_asked = o.partitions;
  stats.private_output = !stats.restricted_member.empty() && !o.public_output;
  if (!stats.private_output && ::chmod(tmp.c_str(), 0755) != 0) {
    const int e = errno;
    fs::remove_all(tmp, ec);
    return Status::FromErrno(tmp, e);
  }
  FANSTORE_RETURN_IF_ERROR(Publish(tmp, out, manifest, stats.private_output));
  stats.bytes_in = manifest.bytes;
  stats.bytes_stored = manifest.stored;
  stats.output_bytes += manifest.Encode().size();
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return stats;
}

}  // namespace pack_parts
}  // namespace fanstore::meta
