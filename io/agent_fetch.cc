// The node agent's client side: members of other nodes' partitions fetched for this node's
// processes (with their neighbours when fetching ahead), checked, and admitted to the node
// cache; timeouts, retries from replicas and damaged transfers.
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "compress/crc32c.h"
#include "io/agent_loop.h"

namespace fanstore::io {
namespace {

// Fetching ahead is turned off when, of at least this many members fetched ahead that left
// the node cache, most left it unread.
constexpr uint64_t kAheadVerdict = 256;
// Entries looked at on each side of a missed member for its neighbours.
constexpr uint32_t kMaxScan = 4096;

}  // namespace

bool Agent::Loop::RangeOf(uint32_t key, KeyRange* out) const {
  if (key < ns.size()) {
    const meta::ImageEntry& e = ns.entry(key);
    if (e.kind != static_cast<uint8_t>(meta::Kind::kFile)) return false;
    *out = KeyRange{key, kWhole, e.data_offset, e.stored_size};
    return true;
  }
  uint32_t member;
  uint64_t p;
  if (!pieces.Split(key, ns, &member, &p)) return false;
  const meta::ImageEntry& e = ns.entry(member);
  *out = KeyRange{member, p, e.data_offset + PieceOffset(p), PieceLength(e.stored_size, p)};
  return true;
}

std::string Agent::Loop::Name(uint32_t key) const {
  return pieces.Name(key, ns);
}

// A new attempt of a fetch, with a buffer for the bytes; nullptr when there is no memory.
// (Not straight into the node cache: that is no faster, since the range carries its padding
// into the cache and MPI's copy lands in pages spread over the arena instead of one buffer
// that stays in the core's cache; docs/design.md.)
std::unique_ptr<Agent::Loop::Attempt> Agent::Loop::NewAttempt(const Fetch& f) {
  auto a = std::make_unique<Attempt>();
  a->req = f.req;
  a->buf.reset(new (std::nothrow) uint8_t[std::max<uint64_t>(f.req.length, 1)]);
  if (a->buf) return a;
  spdlog::error("member {}: no memory for its {} bytes", Name(f.entry), f.req.length);
  return nullptr;
}

// Keeps an attempt that timed out until MPI has finished with it. Its receives stay posted:
// a holder that answers late (stopped, not dead) must be able to complete its sends, or it
// would wait for them at the end of the job (a cancelled receive leaves a large reply's
// rendezvous unanswered).
void Agent::Loop::SetAside(std::unique_ptr<Attempt> a) {
  set_aside.push_back(std::move(a));
}

// Tests the sends nobody waits for and the attempts set aside; frees what MPI is done with.
void Agent::Loop::TestLeftovers() {
  for (size_t i = 0; i < abandoned.size();) {
    if (mpi::World().Test(&abandoned[i])) {
      abandoned[i] = abandoned.back();
      abandoned.pop_back();
    } else {
      ++i;
    }
  }
  for (size_t i = 0; i < set_aside.size();) {
    Attempt& a = *set_aside[i];
    const bool recvd = mpi::World().Testall(static_cast<int>(a.recvs.size()), a.recvs.data());
    const bool sent = mpi::World().Test(&a.send);
    if (recvd && sent) {  // MPI writes nothing there any more: the buffer can go
      set_aside[i] = std::move(set_aside.back());
      set_aside.pop_back();
    } else {
      ++i;
    }
  }
}

// Sends the fetch's request to its next holder that is not suspected: 0, or -EIO when none
// is left, -ENOMEM when there is no memory for the reply.
int32_t Agent::Loop::SendToNextOwner(Fetch& f) {
  const auto now = Clock::now();
  while (f.owner_idx < f.owners.size()) {
    const uint32_t o = f.owners[f.owner_idx];
    if (suspect_until[o] > now) {
      ++f.owner_idx;
      continue;
    }
    if (!f.at && !(f.at = NewAttempt(f))) return -ENOMEM;
    Attempt& a = *f.at;  // new, or one whose receives have all completed (a CRC retry)
    if (a.send != mpi::kNoRequest) abandoned.push_back(a.send);
    a.owner = static_cast<int>(o);
    // A reply tag still posted by an attempt set aside for this holder (its late reply may
    // yet come) is not given out again when the tags wrap round.
    auto in_use = [&](int tag) {
      return std::any_of(set_aside.begin(), set_aside.end(),
                         [&](const auto& s) { return s->owner == a.owner && s->tag == tag; });
    };
    do {
      a.tag = next_tag++;
      if (next_tag > tag_ub) next_tag = kFirstReplyTag;
    } while (!set_aside.empty() && in_use(a.tag));
    a.req.reply_tag = a.tag;
    mpi::World().Isend(&a.req, sizeof a.req, a.owner, kTagRequest, &a.send);
    a.recvs.assign(1, mpi::kNoRequest);
    mpi::World().Irecv(&a.header, sizeof a.header, a.owner, a.tag, &a.recvs[0]);
    for (uint64_t off = 0; off < a.req.length; off += kRemoteChunk) {
      mpi::Request r;
      mpi::World().Irecv(a.buf.get() + off,
                         static_cast<int>(std::min(kRemoteChunk, a.req.length - off)), a.owner,
                         a.tag, &r);
      a.recvs.push_back(r);
    }
    f.deadline = now + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(cfg.timeout_s));
    return 0;
  }
  return -EIO;
}

// The members to fetch for `entry`: it and, fetching ahead, the members of its blob that
// start in the same aligned block and are neither cached nor in flight, by offset. The image
// lists a partition's members in blob order (both are path order), so they are the entries
// next to it; a member listed elsewhere is only missed, never taken wrongly.
std::vector<Agent::Loop::Member> Agent::Loop::RangeAround(uint32_t entry) {
  const meta::ImageEntry& e = ns.entry(entry);
  std::vector<Member> out;
  if (ahead_bytes > 0 && e.stored_size <= arena.max_member()) {
    const uint64_t lo = e.data_offset / ahead_bytes * ahead_bytes, hi = lo + ahead_bytes;
    // Adds entry x if it is a neighbour to fetch; false once x is past the block.
    auto take = [&](uint32_t x) {
      const meta::ImageEntry& m = ns.entry(x);
      if (m.kind != static_cast<uint8_t>(meta::Kind::kFile) || Pieced(m))
        return true;  // (directories; large members are fetched by the piece)
      if (m.partition != e.partition || m.data_offset < lo || m.data_offset >= hi) return false;
      if (m.stored_size > 0 && m.stored_size <= arena.max_member() && !arena.Contains(x) &&
          !joined.contains(x))
        out.push_back(Member{x, m.data_offset, m.stored_size});
      return true;
    };
    const uint32_t first = entry > kMaxScan ? entry - kMaxScan : 0;
    const uint32_t last =
        static_cast<uint32_t>(std::min<uint64_t>(ns.size(), uint64_t{entry} + kMaxScan));
    for (uint32_t x = entry; x-- > first && take(x);) {
    }
    for (uint32_t x = entry + 1; x < last && take(x); ++x) {
    }
  }
  out.push_back(Member{entry, e.data_offset, e.stored_size});
  std::sort(out.begin(), out.end(), [](const Member& a, const Member& b) { return a.off < b.off; });
  return out;
}

void Agent::Loop::StartFetch(uint32_t entry, const Waiter* w) {
  KeyRange kr;
  RangeOf(entry, &kr);  // (HandleClient checked the key)
  if (auto j = joined.find(entry); j != joined.end()) {
    if (w) fetches.find(j->second).value()->waiters.push_back(*w);
    Count(&AgentStats::deduplicated);
    if (w && kr.piece != kWhole) PieceAhead(entry, kr);  // (a piece fetched ahead is waited for)
    return;
  }
  const meta::ImageEntry& e = ns.entry(kr.member);
  auto f = std::make_unique<Fetch>();
  f->entry = entry;
  if (w) f->waiters.push_back(*w);
  const bool bcast = e.partition < cfg.broadcast.size() && cfg.broadcast[e.partition];
  f->owners = cfg.placement.Owners(e.partition, bcast);
  // Spread the load over the replicas: start at a rank-dependent holder.
  if (f->owners.size() > 1)
    std::rotate(
        f->owners.begin(),
        f->owners.begin() + static_cast<long>(static_cast<uint32_t>(cfg.rank) % f->owners.size()),
        f->owners.end());
  f->owners.erase(std::remove(f->owners.begin(), f->owners.end(), static_cast<uint32_t>(cfg.rank)),
                  f->owners.end());
  if (!cfg.mpi) {  // one node holds everything: nothing to fetch
    if (w) Reply(w->conn, -EINVAL, -1);
    return;
  }
  // A piece comes alone, checked by the transfer's CRC32C (the namespace's is of the whole
  // member).
  if (kr.piece == kWhole)
    f->members = RangeAround(entry);
  else
    f->members = {Member{entry, kr.offset, kr.length}};
  const uint64_t start = f->members.front().off;
  uint64_t end = start;
  bool raw = kr.piece == kWhole;
  for (Member& m : f->members) {
    end = std::max(end, m.off + m.len);
    m.off -= start;  // from here on: in the range
    raw = raw && ns.entry(m.entry).codec == static_cast<uint8_t>(meta::Codec::kRaw);
    joined.emplace(m.entry, entry);
  }
  const uint32_t focus = static_cast<uint32_t>(kr.offset - start);
  f->req = RemoteRequest{e.partition, 0, start, end - start, raw ? kNoTransferCrc : 0, focus};
  Fetch& ref = *f;
  fetches.emplace(entry, std::move(f));
  if (const int32_t rc = SendToNextOwner(ref); rc != 0) {
    Complete(ref, rc);
    return;
  }
  if (w && kr.piece != kWhole) PieceAhead(entry, kr);
}

// A process reading a large member in order (the piece before the one it asked for is
// cached or on its way) gets the next piece fetched with this one, into the node cache, so
// its transfer overlaps the reading of this one; a reader that jumps about (an HDF5 or
// LMDB file) fetches only what it reads. Off with --fetch-ahead 0, or once fetching ahead
// was found to waste the cache.
void Agent::Loop::PieceAhead(uint32_t key, const KeyRange& kr) {
  const uint64_t count = PieceCount(ns.entry(kr.member).stored_size);
  if (ahead_bytes == 0 || kr.piece == 0 || kr.piece + 1 >= count || kr.length > arena.max_member())
    return;
  const uint32_t before = key - 1, next = key + 1;
  if (!arena.Contains(before) && !joined.contains(before)) return;
  if (arena.Contains(next) || joined.contains(next)) return;
  StartFetch(next, nullptr);
}

// A private copy of a member's stored bytes: a sealed memfd, sent with replies to the
// processes that get copies (a member too large for the node cache, or a process that
// asked for one). -1 (logged) when it cannot be made.
int Agent::Loop::MakeCopy(uint32_t entry, const uint8_t* bytes, uint64_t len) {
  int fd = ::memfd_create("fanstore-member", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  int err = fd < 0 ? errno : 0;
  for (uint64_t done = 0; fd >= 0 && done < len;) {
    const ssize_t n = ::pwrite(fd, bytes + done, len - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : EIO;
      ::close(fd);
      fd = -1;
      break;
    }
    done += static_cast<uint64_t>(n);
  }
  if (fd < 0) {
    spdlog::error("member {}: cannot make a copy for a local process: {}", Name(entry),
                  std::strerror(err));
    return -1;
  }
  ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
  return fd;
}

// Finishes a fetch: on success each member whose bytes are good goes into the node cache
// (unless too large for it) and its waiters are told so, or get a private copy; a damaged
// one's waiters get EIO. On failure every waiter gets `status`. Erases the fetch.
void Agent::Loop::Complete(Fetch& f, int32_t status) {
  // An attempt still here has had all its receives completed; its request has reached the
  // holder, and a send MPI has not yet reported done is only tested from now on.
  if (f.at && f.at->send != mpi::kNoRequest && !mpi::World().Test(&f.at->send))
    abandoned.push_back(f.at->send);
  for (const Member& m : f.members) joined.erase(m.entry);
  if (status != 0) {
    Count(&AgentStats::failures);
    for (const Waiter& w : f.waiters) Reply(w.conn, status, -1);
    fetches.erase(f.entry);
    return;
  }
  Count(&AgentStats::fetched);
  Count(&AgentStats::fetched_bytes, f.req.length);
  const size_t n = f.members.size();
  std::vector<uint8_t> waited(n, 0), kept(n, 0);
  std::vector<int> copies(n, -2);  // a private copy, made once for every waiter that gets one
  // A waiter's member is always in its fetch (StartFetch joins it to the fetch that holds
  // it); n, answered with EIO, would be a bug, never another member's bytes.
  auto index_of = [&](uint32_t entry) {
    size_t i = 0;
    while (i < n && f.members[i].entry != entry) ++i;
    return i;
  };
  for (const Waiter& w : f.waiters)
    if (const size_t i = index_of(w.entry); i < n) waited[i] = 1;
  const uint64_t evicted = arena.evictions();
  uint64_t ahead = 0;
  auto admit = [&](size_t i) {
    const Member& m = f.members[i];
    if ((!f.bad.empty() && f.bad[i]) || m.len > arena.max_member()) return;
    const Status st = arena.Admit(m.entry, f.at->buf.get() + m.off, m.len, !waited[i]);
    kept[i] = st.ok();
    ahead += kept[i] && !waited[i];
    if (!kept[i] && !arena_failed) {  // said once: every later fetch would say it again
      spdlog::error("{} (members fetched from now on are handed out as private copies)",
                    st.message());
      arena_failed = true;
    }
  };
  // The members processes wait for first: they are answered before the rest is copied.
  for (size_t i = 0; i < n; ++i)
    if (waited[i]) admit(i);
  for (const Waiter& w : f.waiters) {
    const size_t i = index_of(w.entry);
    if (i == n) {
      spdlog::error("member {}: answered by a fetch that does not hold it (a bug): EIO",
                    Name(w.entry));
      Reply(w.conn, -EIO, -1);
    } else if (!f.bad.empty() && f.bad[i]) {
      Reply(w.conn, -EIO, -1);
    } else if (kept[i] && !w.copy) {
      Reply(w.conn, 0, -1);
    } else {
      const Member& m = f.members[i];
      if (copies[i] == -2) copies[i] = MakeCopy(m.entry, f.at->buf.get() + m.off, m.len);
      Reply(w.conn, copies[i] >= 0 ? 0 : -EIO, copies[i]);
    }
  }
  for (int c : copies)
    if (c >= 0) ::close(c);
  for (size_t i = 0; i < n; ++i)
    if (!waited[i]) admit(i);
  Count(&AgentStats::evictions, arena.evictions() - evicted);
  Count(&AgentStats::fetched_ahead, ahead);
  fetches.erase(f.entry);
  CheckAhead();
}

// Fetching ahead pays only when the members fetched ahead are read before the cache lets
// them go; when most leave unread (a cache too small for the working set, or a node that
// reads only its share of a shuffled dataset) it only costs transfers and cache space.
void Agent::Loop::CheckAhead() {
  const uint64_t wasted = arena.ahead_wasted(), used = arena.ahead_used();
  {
    std::lock_guard<std::mutex> lk(stats_mu);
    stats.ahead_unread = wasted;
  }
  if (ahead_bytes == 0 || wasted + used < kAheadVerdict || wasted <= used) return;
  ahead_bytes = 0;
  spdlog::info(
      "fetch-ahead turned off: {} of {} members fetched ahead left the node cache unread "
      "(a larger --cache-size may keep them until they are read)",
      wasted, wasted + used);
}

// Checks a completed reply's bytes: every raw member against its CRC32C in the namespace,
// the whole range against the header's CRC32C when it holds a compressed member. Marks
// damaged members in f.bad; true when a member somebody waits for is damaged.
bool Agent::Loop::Verify(Fetch& f) {
  Attempt& a = *f.at;
  const bool range_ok = (a.req.flags & kNoTransferCrc) ||
                        compress::Crc32c(0, a.buf.get(), a.req.length) == a.header.crc32c;
  f.bad.assign(f.members.size(), 0);
  bool waited_bad = false;
  for (size_t i = 0; i < f.members.size(); ++i) {
    const Member& m = f.members[i];
    // (a piece's key is past the entries: a piece is checked by the range's CRC only)
    const bool raw =
        m.entry < ns.size() && ns.entry(m.entry).codec == static_cast<uint8_t>(meta::Codec::kRaw);
    if (range_ok &&
        (!raw || compress::Crc32c(0, a.buf.get() + m.off, m.len) == ns.entry(m.entry).crc32c))
      continue;
    f.bad[i] = 1;
    const bool waited = std::any_of(f.waiters.begin(), f.waiters.end(),
                                    [&](const Waiter& w) { return w.entry == m.entry; });
    if (!waited) {
      spdlog::debug(
          "member {} from rank {}: damaged transfer (CRC mismatch), fetched ahead: left out",
          Name(m.entry), a.owner);
      continue;
    }
    waited_bad = true;
    spdlog::warn("member {} from rank {}: damaged transfer (CRC mismatch){}", Name(m.entry),
                 a.owner, f.retried ? ", giving up" : ", retrying");
  }
  return waited_bad;
}

bool Agent::Loop::ProgressFetches() {
  bool active = false;
  std::vector<uint32_t>& keys = fetch_keys;  // (a member: no allocation per turn of the loop)
  keys.clear();
  for (auto& [entry, f] : fetches) keys.push_back(entry);
  const auto now = Clock::now();
  for (uint32_t entry : keys) {
    Fetch& f = *fetches.find(entry).value();
    Attempt& a = *f.at;
    if (mpi::World().Testall(static_cast<int>(a.recvs.size()), a.recvs.data())) {
      active = true;
      int32_t status = a.header.status;
      if (status == 0 && a.header.length != a.req.length) status = -EIO;
      if (status == 0 && Verify(f) && !f.retried) {
        f.retried = true;
        Count(&AgentStats::crc_retries);
        if (SendToNextOwner(f) == 0) continue;
      }
      if (status != 0 && status != -EIO) {  // the holder could not read it: try another
        ++f.owner_idx;
        if (SendToNextOwner(f) == 0) continue;
      }
      Complete(f, status);
    } else if (now > f.deadline) {
      active = true;
      Count(&AgentStats::timeouts);
      spdlog::warn("rank {} did not answer within {} s: suspected for {} s", a.owner, cfg.timeout_s,
                   10 * cfg.timeout_s);
      suspect_until[static_cast<size_t>(a.owner)] =
          now + std::chrono::duration_cast<Clock::duration>(
                    std::chrono::duration<double>(10 * cfg.timeout_s));
      SetAside(std::move(f.at));
      ++f.owner_idx;
      if (const int32_t rc = SendToNextOwner(f); rc != 0) Complete(f, rc);
    }
  }
  TestLeftovers();
  return active;
}

}  // namespace fanstore::io
