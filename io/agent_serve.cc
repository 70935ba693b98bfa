// The node agent's server side: other nodes' requests for the partitions this node holds,
// answered from the blob's mapping when its pages are resident, else with pread. While this
// node copies its share as CMD runs (io/landing.h), a request for chunks that have not landed
// waits for them.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "base/clock.h"
#include "compress/crc32c.h"
#include "io/agent_loop.h"
#include "io/resident.h"

namespace fanstore::io {

// The blob bytes [off, off + len) of partition p when every page of them is in the page
// cache: they are then sent straight from the mapping, without a read copy. A page that is
// not (a cold blob served in place) sends the request to pread, so the loop never waits on
// a page fault, and a blob cut shorter than it was never faults (SIGBUS) here.
const uint8_t* Agent::Loop::Resident(uint32_t p, uint64_t off, uint64_t len) {
  // (bounds first: a length past the blob must not size the vector)
  if (len == 0 || off > blob_sizes[p] || len > blob_sizes[p] - off) return nullptr;
  if (!blob_in_memory[p]) mincore_vec.resize(SpannedPages(off, len));
  return ResidentBytes(blob_maps[p], blob_sizes[p], off, len, blob_in_memory[p], mincore_vec.data(),
                       [](const uint8_t* at, uint64_t n, unsigned char* v) {
                         return ::mincore(const_cast<uint8_t*>(at), n, v);
                       });
}

void Agent::Loop::Serve(const RemoteRequest& req, int source) {
  Outgoing& out = outgoing.emplace_back();  // list nodes stay put while MPI sends from them
  RemoteReplyHeader& h = out.header;
  h = RemoteReplyHeader{0, 0, 0};
  const uint64_t len = req.length;
  const uint8_t* data = nullptr;
  bool from_map = true;
  int fd = -1;
  if (req.partition >= blob_fds.size() || blob_fds[req.partition] < 0) {
    h.status = -ENOENT;  // we do not hold that partition (a placement disagreement)
  } else if ((fd = SourceFd(req.partition, req.offset, len, &from_map)),
             !from_map || !(data = Resident(req.partition, req.offset, len)) || corrupt_left > 0) {
    out.buf.reset(new (std::nothrow) uint8_t[std::max<uint64_t>(len, 1)]);
    if (!out.buf) h.status = -ENOMEM;
    for (uint64_t done = 0; h.status == 0 && done < len;) {
      const ssize_t n =
          ::pread(fd, out.buf.get() + done, len - done, static_cast<off_t>(req.offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) h.status = n < 0 ? -errno : -EIO;
      done += n > 0 ? static_cast<uint64_t>(n) : 0;
    }
    data = out.buf.get();
  }
  if (h.status == 0) {
    h.length = len;
    if (!(req.flags & kNoTransferCrc)) h.crc32c = compress::Crc32c(0, data, len);
    if (corrupt_left > 0 && len > 0) {  // fault injection (tests): a damaged transfer
      --corrupt_left;
      out.buf[req.focus < len ? req.focus : len / 2] ^= 0x5a;  // in the member asked for
    }
  }
  mpi::Request r;
  mpi::World().Isend(&h, sizeof h, source, req.reply_tag, &r);
  out.handles.push_back(r);
  // Exactly the data messages the requester posted, empty after an error.
  const uint64_t chunks = RemoteChunks(len);
  for (uint64_t i = 0; i < chunks; ++i) {
    const uint64_t off = i * kRemoteChunk;
    const uint64_t n = h.status == 0 ? std::min(kRemoteChunk, len - off) : 0;
    mpi::World().Isend(h.status == 0 ? data + off : nullptr, static_cast<int>(n), source,
                       req.reply_tag, &r);
    out.handles.push_back(r);
  }
  Count(&AgentStats::served);
  Count(&AgentStats::served_bytes, h.length);
}

bool Agent::Loop::ProgressServer() {
  int done[kPostedRequests + 1], sources[kPostedRequests + 1];
  const int count = mpi::World().Testsome(kPostedRequests + 1, server_handles, done, sources);
  bool active = count > 0;
  for (int k = 0; active && k < count; ++k) {
    const int i = done[k];
    if (i == kStopSlot) {
      job_stop = true;
      continue;
    }
    const RemoteRequest req = posted_req[i];
    PostRequest(i);
    if (cfg.silent) continue;
    if (MustWait(req))
      waiting.push_back(
          {req, sources[k], LandingPatience(landing.Progress(), base::MonotonicNs())});
    else
      Serve(req, sources[k]);
  }
  active |= TestOutgoing();
  return active;
}

// Whether a request must wait for the chunks it spans: its partition is being copied and
// they have not landed. The copier is asked for them (it takes wanted chunks next), so the
// shared file system sees those bytes once, in the copier's large reads, and not also in a
// small read here.
bool Agent::Loop::MustWait(const RemoteRequest& req) {
  const uint32_t p = req.partition;
  if (!BeingCopied(p) || !landing.Copying() || landing.State(p) != LandingState::kCopying)
    return false;
  const uint64_t span = landing.chunks(p) * landing.chunk_bytes();
  if (req.length == 0 || req.offset >= span || req.length > span - req.offset ||
      landing.RangeLanded(p, req.offset, req.length))
    return false;  // (a range past the partition is refused by Serve at once)
  landing.Want(p, req.offset, req.length);
  return true;
}

// Requests whose chunks have landed (or whose copy stopped, or is stuck: then DATA is read)
// are answered; a partition whose copy is done moves to it. True when something was
// answered.
bool Agent::Loop::ProgressLanding() {
  if (!landing.valid()) return false;
  bool any = false;
  const int64_t now = base::MonotonicNs();
  const uint64_t progress = waiting.empty() ? 0 : landing.Progress();
  for (size_t i = 0; i < waiting.size();) {
    const RemoteRequest req = waiting[i].req;
    const int source = waiting[i].source;
    const bool landed = landing.RangeLanded(req.partition, req.offset, req.length);
    const bool copying =
        landing.Copying() && landing.State(req.partition) == LandingState::kCopying;
    if (!landed && copying && !waiting[i].patience.Expired(now, progress)) {
      ++i;
      continue;
    }
    waiting.erase(waiting.begin() + static_cast<std::ptrdiff_t>(i));
    if (landed) Count(&AgentStats::waited_for_copy);
    if (!landed && copying) Count(&AgentStats::gave_up_on_copy);
    Serve(req, source);
    any = true;
  }
  // Once every copy has ended, the node cache is allocated ahead (io/agent.h), as it is
  // after a stage-in made before the exchange: not earlier, where it would take room the
  // copies on this host still need.
  bool copying = false;
  for (uint32_t p = 0; p < moved.size(); ++p) {
    if (cfg.copy_paths[p].empty()) continue;
    const LandingState st = landing.State(p);
    if (st == LandingState::kDone && !moved[p]) MoveToCopy(p);
    copying |= st == LandingState::kCopying;
  }
  if (cache_ahead_due && !copying) {
    cache_ahead_due = false;
    AllocateCacheAhead();
  }
  return any;
}

// Partition p's blob becomes its finished copy: opened and mapped as OpenStorage does (the
// copy is fanrun's own). DATA's descriptor and mapping are left open (a reply may still be
// sent from them); false when the copy cannot be opened: DATA then stays the blob, and the
// copy is not looked for again.
bool Agent::Loop::MoveToCopy(uint32_t p) {
  moved[p] = 1;
  const int fd = ::open(cfg.copy_paths[p].c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  void* m = MAP_FAILED;
  if (::fstat(fd, &st) == 0 && st.st_size > 0)
    m = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
  left_behind.push_back({blob_fds[p], {blob_maps[p], blob_sizes[p]}});
  blob_fds[p] = fd;
  blob_maps[p] = m == MAP_FAILED ? nullptr : static_cast<const uint8_t*>(m);
  blob_sizes[p] = m == MAP_FAILED ? 0 : static_cast<uint64_t>(st.st_size);
  struct statfs fs;
  blob_in_memory[p] = blob_maps[p] && ::fstatfs(fd, &fs) == 0 && AlwaysResident(true, fs.f_type);
  if (staging_fds[p] >= 0)
    ::close(staging_fds[p]);  // (read with pread only: nothing sends from it)
  staging_fds[p] = -1;
  return true;
}

// Where partition p's bytes [off, off + len) are read now. Its blob, except while it is
// copied: chunks that landed in the partial copy (DATA's file system does not keep them in
// its page cache) are read there, and a copy that is done becomes the blob. *from_map: the
// blob's mapping may be sent from.
int Agent::Loop::SourceFd(uint32_t p, uint64_t off, uint64_t len, bool* from_map) {
  *from_map = true;
  if (!BeingCopied(p)) return blob_fds[p];
  const LandingState st = landing.State(p);
  if (st == LandingState::kDone) {
    MoveToCopy(p);
    return blob_fds[p];
  }
  if (st == LandingState::kFailed || landing.FromData() || !landing.RangeLanded(p, off, len))
    return blob_fds[p];
  if (staging_fds[p] < 0) {
    staging_fds[p] = ::open((cfg.copy_paths[p] + ".staging").c_str(), O_RDONLY | O_CLOEXEC);
    if (staging_fds[p] < 0) {  // (renamed since: done)
      MoveToCopy(p);
      return blob_fds[p];
    }
  }
  *from_map = false;
  return staging_fds[p];
}

// Tests the replies this node is sending; true when one completed.
bool Agent::Loop::TestOutgoing() {
  bool any = false;
  for (auto it = outgoing.begin(); it != outgoing.end();) {
    if (mpi::World().Testall(static_cast<int>(it->handles.size()), it->handles.data())) {
      it = outgoing.erase(it);
      any = true;
    } else {
      ++it;
    }
  }
  return any;
}

}  // namespace fanstore::io
