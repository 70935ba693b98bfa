// The start-up's namespace phase: the members every rank is primary for, exchanged with
// MPI_Allgatherv; the namespace image built from them straight into its shared file; the
// files `fanrun attach` and the runtime read; the mount point and its skeleton.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <string>
#include <vector>

#include "bin/fanrun_node_parts.h"
#include "bin/mount_choice.h"
#include "io/mpi.h"
#include "meta/exchange.h"
#include "meta/namespace_image.h"
#include "runtime/data/verified.h"

namespace fanstore::fanrun {
namespace {

// The namespace exchange: each rank encodes the partitions it is primary for (rank 0 the
// broadcast ones); sizes, then the payload, by MPI_Allgatherv. Every rank gets every block.
Result<std::string> ExchangeNamespace(bool mpi, int rank, int nodes,
                                      const meta::Placement& placement,
                                      const std::vector<uint8_t>& broadcast,
                                      const std::vector<meta::PartitionReader>& readers) {
  std::string mine;
  for (uint32_t p = 0; p < readers.size(); ++p) {
    const bool primary =
        broadcast[p] ? rank == 0 : placement.Owners(p, false)[0] == static_cast<uint32_t>(rank);
    if (primary) meta::EncodeMembers(readers[p], p, &mine);
  }
  if (!mpi || nodes == 1) return mine;
  std::vector<int64_t> sizes(static_cast<size_t>(nodes));
  mpi::World().AllgatherInt64(static_cast<int64_t>(mine.size()), sizes.data());
  std::vector<int> counts(sizes.size()), displs(sizes.size());
  int64_t total = 0;
  for (size_t r = 0; r < sizes.size(); ++r) {
    counts[r] = static_cast<int>(sizes[r]);
    displs[r] = static_cast<int>(total);
    total += sizes[r];
  }
  if (total > INT_MAX)  // the same answer on every rank: all of them stop here
    return Status::Error("the namespace is " + std::to_string(total) +
                         " bytes, over the 2 GiB an MPI_Allgatherv can carry");
  std::string all(static_cast<size_t>(total), '\0');
  mpi::World().Allgatherv(mine.data(), static_cast<int>(mine.size()), all.data(), counts.data(),
                          displs.data());
  return all;
}

}  // namespace

// The namespace: the exchange (whose failure is the same on every rank), the image, the
// files `fanrun attach` and the runtime read, the agent's socket and the mount point's
// directories.
Status Node::StartNamespace(const NodeOptions& opt, StartUp* s) {
  Status& st = s->st;
  const auto t_exchange = Clock::now();
  auto all = ExchangeNamespace(mpi_, rank_, nodes_, s->placement, s->broadcast, s->readers);
  if (!all.ok()) return Status::Error(s->where + all.status().message());
  s->exchanged = all->size();
  s->exchange_s = Since(t_exchange);
  const auto t_build = Clock::now();
  image_path_ = rank_dir_ + "/namespace.img";
  if (st.ok()) st = PublishImage(*all, s->local_paths, s->manifest.dataset_id);
  if (st.ok()) {
    // Partitions whose staged copies were checked whole as they were made (not those read
    // in place, nor those copied while CMD runs): their raw members start
    // marked, so that no process checks them again.
    std::vector<uint8_t> checked(s->local_paths.size(), 0);
    const bool copies_checked = s->stage && staging_from_.empty();
    for (size_t p = 0; p < checked.size() && copies_checked; ++p)
      checked[p] = !s->local_paths[p].empty();
    for (uint32_t p : s->in_place) checked[p] = 0;
    st = MakeVerifiedMarks(checked);
  }
  std::string().swap(*all);
  std::string mount = opt.mount.empty() ? s->manifest.source : opt.mount;
  while (mount.size() > 1 && mount.back() == '/') mount.pop_back();
  if (st.ok() && opt.mount.empty())  // a dataset made by someone else does not choose it
    if (std::string why = DefaultMountRefusal(mount); !why.empty()) st = Status::Error(why);
  if (st.ok() && (mount.empty() || mount[0] != '/'))
    st = Status::Error("--mount: must be an absolute path, got '" + mount + "'");
  if (st.ok()) st = CheckMountPoint(mount);
  mount_ = mount;
  if (st.ok()) st = WriteFile(rank_dir_ + "/mount", mount_);
  if (st.ok()) st = WriteFile(rank_dir_ + "/cache-dir", cache_dir());
  staged_ = s->stage && s->in_place.empty();  // (every local blob is fanrun's own copy)
  if (st.ok()) st = WriteFile(rank_dir_ + "/staged", staged_ ? "1" : "0");  // (for fanrun attach)
  if (st.ok()) st = WriteFile(rank_dir_ + "/nodes", std::to_string(nodes_));
  s->build_s = Since(t_build);
  if (!st.ok()) return Status::Ok();  // (said at the agreement)
  auto view = meta::NamespaceView::Attach({image_, image_size_});
  if (!view.ok()) {
    st = view.status();
    return Status::Ok();
  }
  if (agent_) st = agent_->Open(*view);
  if (st.ok()) skeleton_ = MakeSkeleton(*view, mount_);
  return Status::Ok();
}

// The node's marks of raw members checked against their CRC32C (runtime/data/verified.h): a
// file beside the image, which every served process of the node maps, with the raw
// members of the partitions `checked` names marked and the rest zero (a sparse file), and
// the index of the members whose blocks are marked one by one.
Status Node::MakeVerifiedMarks(const std::vector<uint8_t>& checked) {
  const std::string path = runtime::VerifiedPathBeside(image_path_);
  auto view = meta::NamespaceView::AttachLayout({image_, image_size_});
  if (!view.ok()) return Status::Error(image_path_ + ": " + view.status().message());
  std::vector<uint64_t> index;
  const runtime::VerifiedLayout l = runtime::ForEachBlockedMember(
      *view, [&](uint32_t e, uint64_t first) { index.push_back(uint64_t{e} << 32 | first); });
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno(path, errno);
  const uint64_t bytes = runtime::VerifiedBytes(view->size());
  int err = ::ftruncate(fd, static_cast<off_t>(l.bytes())) == 0 ? 0 : errno;
  std::vector<uint64_t> words;
  for (uint32_t i = 0; i < view->size() && err == 0; ++i) {
    const meta::ImageEntry& e = view->entry(i);
    if (e.kind != static_cast<uint8_t>(meta::Kind::kFile) || !meta::StoredRaw(e.codec) ||
        e.partition >= checked.size() || !checked[e.partition])
      continue;
    if (words.empty()) words.assign(bytes / 8, 0);
    words[i / 64] |= uint64_t{1} << (i % 64);
  }
  if (err == 0 && !words.empty() &&
      ::pwrite(fd, words.data(), bytes, 0) != static_cast<ssize_t>(bytes))
    err = errno ? errno : EIO;
  index.insert(index.begin(), l.indexed);
  const uint64_t index_bytes = index.size() * 8;
  if (err == 0 && ::pwrite(fd, index.data(), index_bytes, static_cast<off_t>(l.index_off())) !=
                      static_cast<ssize_t>(index_bytes))
    err = errno ? errno : EIO;
  ::close(fd);
  return err == 0 ? Status::Ok() : Status::FromErrno(path, err);
}

// Decodes the exchanged members and builds the image straight into a shared mapping of
// the image file (no copy, no write), published under its final name when complete.
Status Node::PublishImage(std::string_view exchanged, const std::vector<std::string>& local_paths,
                          uint64_t dataset_id) {
  const std::string tmp = image_path_ + ".tmp";
  const int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno(tmp, errno);
  auto size = meta::BuildNamespaceImageInto(
      exchanged, local_paths, dataset_id, [&](uint64_t n) -> uint8_t* {
        if (::ftruncate(fd, static_cast<off_t>(n)) != 0) return nullptr;
        void* m = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) return nullptr;
        image_ = static_cast<uint8_t*>(m);
        image_size_ = n;
        return image_;
      });
  ::close(fd);
  if (!size.ok()) {
    ::unlink(tmp.c_str());
    return Status::Error(image_path_ + ": " + size.status().message());
  }
  if (::rename(tmp.c_str(), image_path_.c_str()) != 0) return Status::FromErrno(image_path_, errno);
  return Status::Ok();
}

}  // namespace fanstore::fanrun
