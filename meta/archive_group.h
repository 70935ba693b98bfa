// One group of the archive packer: a run of consecutive sources (archives and
// directories) read in order by one thread into partitions of its own, with the group's
// part of the namespace kept as records for the merge (archive_merge.h).
// Thread-safety: a GroupPacker is run by one thread; bytes_read() and files() may be read
// from another (progress); the rest after Run returns.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "meta/archive_reader.h"
#include "meta/archive_sources.h"
#include "meta/encode_pool.h"
#include "meta/pack_parts.h"
#include "meta/partition_writer.h"

namespace fanstore::meta::archive_pack {

constexpr int kMaxNesting = 8;
// What a group returns when another group's failure stopped it (not shown to the user).
constexpr const char* kStopped = "stopped: another source failed";
// The size a directory made from an archive reports: what ext4 and XFS report for one
// extracted there (a tree packed from disk keeps the size its file system gave).
constexpr uint64_t kDirSize = 4096;

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

// Reads one group's sources, in order, into its partitions; keeps the records (its part
// of the namespace, in arrival order) for the merge. Warnings are kept, to be shown in
// source order whatever thread ran first.
class GroupPacker {
 public:
  GroupPacker(const PackOptions& o, const std::string& tmp, uint32_t group, const Group& g,
              unsigned threads, EncodePool& pool, std::atomic<bool>& abort);

  ~GroupPacker() {
    for (auto& p : pending_) pool_.Take(*p.first);  // (a worker may still hold it)
  }

  Status Run(const Group& g);

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
  Status AddSource(const std::string& path);

  bool IsBroadcast(const std::string& path) const;

  Status CheckedPrefix(const std::string& prefix, const std::string& source);

  // The member path of an archive name under `prefix`, or an error naming the archive.
  Result<std::string> MemberPath(const std::string& raw, const std::string& prefix,
                                 const EntryReader& r, uint64_t at);

  Status ReadAll(EntryReader& r, const std::string& prefix, int depth,
                 const std::function<void()>& tick);

  Status AddEntry(EntryReader& r, const ArchiveEntry& e, const std::string& path,
                  const std::string& prefix, int depth, const std::function<void()>& tick);

  size_t Insert(Rec rec);

  bool HasChildren(const std::string& dir);

  // Makes or updates the directory `path` (`m` null: an implicit one, default attributes).
  Status MakeDir(const std::string& path, const Member* m, const std::string& archive, uint64_t at);

  Status MakeParents(const std::string& path, const std::string& archive);

  // The partition of a new file or symlink: the broadcast one if a glob names it, else the
  // current one, or the next when the current holds its share and at least one file.
  Result<uint32_t> PartFor(const std::string& path, uint64_t size);

  Status OpenPart(uint32_t p);

  PartitionWriter& Writer(uint32_t part);

  Status EnsureWriter(uint32_t part);

  Status DrainOne();

  Status DrainAll();

  const PackOptions& o_;
  const std::string& tmp_;
  uint32_t group_;
  unsigned threads_;
  pack_parts::Policy policy_;
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

}  // namespace fanstore::meta::archive_pack
