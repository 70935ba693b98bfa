// The node agent's server side: other nodes' requests for the partitions this node holds,
// answered from the blob's mapping when its pages are resident, else with pread.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

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
  if (req.partition >= blob_fds.size() || blob_fds[req.partition] < 0) {
    h.status = -ENOENT;  // we do not hold that partition (a placement disagreement)
  } else if (!(data = Resident(req.partition, req.offset, len)) || corrupt_left > 0) {
    out.buf.reset(new (std::nothrow) uint8_t[std::max<uint64_t>(len, 1)]);
    if (!out.buf) h.status = -ENOMEM;
    for (uint64_t done = 0; h.status == 0 && done < len;) {
      const ssize_t n = ::pread(blob_fds[req.partition], out.buf.get() + done, len - done,
                                static_cast<off_t>(req.offset + done));
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
    if (!cfg.silent) Serve(req, sources[k]);
  }
  active |= TestOutgoing();
  return active;
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
