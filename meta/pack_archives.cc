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
// The pieces: archive_sources.h (names, braces, groups), encode_pool.h (the workers),
// dir_reader.h (a directory as an archive), archive_group.h (one group's reader),
// archive_merge.h (the merge); this file runs them.

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "meta/archive_merge.h"
#include "meta/pack_parts.h"

namespace fanstore::meta {
namespace fs = std::filesystem;
using archive_pack::EncodePool;
using archive_pack::Group;
using archive_pack::GroupPacker;
using archive_pack::kStopped;
using archive_pack::MakeGroups;
using archive_pack::Merge;
using archive_pack::StripArchiveSuffix;

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
