// The node agent's event loop (io/agent.h), shared by the files that implement it:
// agent.cc (the loop, its socket and the job's end), agent_serve.cc (answering other nodes'
// requests) and agent_fetch.cc (fetching remote members into the node cache).
// Internal to fanstore_io: nothing outside io/ includes it.
// Thread-safety: the loop and everything it holds belong to the agent thread alone (what
// other threads may call is in io/agent.h).
#pragma once

#include <tsl/robin_map.h>

#include <chrono>
#include <condition_variable>
#include <list>
#include <memory>
#include <mutex>
#include <vector>

#include "io/agent.h"
#include "io/landing.h"
#include "io/mpi.h"
#include "io/node_cache.h"
#include "io/pieces.h"
#include "io/protocol.h"

namespace fanstore::io {

inline constexpr int kPostedRequests = 8;

struct Agent::Loop {
  using Clock = std::chrono::steady_clock;

  AgentConfig cfg;
  meta::NamespaceView ns;
  PieceIndex pieces;  // the node cache's keys past the entries: pieces of large members
  std::vector<int> blob_fds;
  std::vector<const uint8_t*> blob_maps;  // nullptr: not mapped (served with pread)
  std::vector<uint64_t> blob_sizes;
  // io::AlwaysResident blobs (staged copies on tmpfs): replies are sent from the mapping
  // without asking mincore.
  std::vector<uint8_t> blob_in_memory;
  int listen_fd = -1, epoll_fd = -1, wake_fd = -1;
  int nodes = 1, tag_ub = 32767, next_tag = kFirstReplyTag;

  // Control from the owning thread.
  std::atomic<bool> finish_requested{false}, stop_requested{false};
  std::mutex mu;
  std::condition_variable cv;
  bool stopped = false;   // the job has ended (guarded by mu)
  bool job_stop = false;  // a stop (not just this rank's finish) was seen

  mutable std::mutex stats_mu;
  AgentStats stats;

  // Server side: the receives posted for requests, then the one for a stop, in one array so
  // that a turn of the loop tests them all with one MPI_Testsome (one progress call, not one
  // per receive: each MPI_Test drives the whole transport).
  static constexpr int kStopSlot = kPostedRequests;
  RemoteRequest posted_req[kPostedRequests];
  mpi::Request server_handles[kPostedRequests + 1];
  int stop_msg = 0;
  struct Outgoing {
    RemoteReplyHeader header;
    std::unique_ptr<uint8_t[]> buf;  // the bytes read (nullptr when sent from the mapping)
    std::vector<mpi::Request> handles;
  };
  std::list<Outgoing> outgoing;
  uint64_t corrupt_left = 0;

  // Copies made while CMD runs (AgentConfig::landing_path): requests waiting for their
  // chunks, each partition's partial copy (read for chunks landed in it) and whether the
  // blob was moved to the finished copy; the fds and mappings of DATA's blobs left behind
  // stay open until the end, since replies may still be sent from them.
  LandingMap landing;
  struct Waiting {
    RemoteRequest req;
    int source;
    LandingPatience patience;
  };
  std::vector<Waiting> waiting;
  std::vector<int> staging_fds;
  std::vector<uint8_t> moved;
  std::vector<std::pair<int, std::pair<const uint8_t*, uint64_t>>> left_behind;
  bool cache_ahead_due = false;  // AllocateCacheAhead once every copy has ended

  // Client side. Fetches, waiters and the node cache are by key: a member's entry, or a
  // piece of a large member (io/pieces.h).
  struct Waiter {
    int conn;
    bool copy;       // wants a descriptor of a private copy (kFetchCopy)
    uint32_t entry;  // the key
  };
  // One request to one holder and the receives of its reply: everything MPI may still
  // write into lives here, so an attempt that timed out is set aside whole until MPI is done
  // with it (its receives stay posted, for a late reply), and a retry gets a new one.
  struct Attempt {
    int owner = -1, tag = 0;
    RemoteRequest req{};
    mpi::Request send = mpi::kNoRequest;
    std::vector<mpi::Request> recvs;  // the header, then the data chunks
    RemoteReplyHeader header{};
    std::unique_ptr<uint8_t[]> buf;  // the stored bytes
  };
  // A member of a fetched range: where its stored bytes are in the range.
  struct Member {
    uint32_t entry;
    uint64_t off, len;
  };
  struct Fetch {
    uint32_t entry;               // the member asked for first (the key in `fetches`)
    std::vector<Member> members;  // by offset: it and the members fetched ahead with it
    std::vector<uint8_t> bad;     // per member, once checked: its bytes are damaged
    std::vector<Waiter> waiters;
    std::vector<uint32_t> owners;
    size_t owner_idx = 0;
    bool retried = false;
    RemoteRequest req{};
    std::unique_ptr<Attempt> at;
    Clock::time_point deadline;
  };
  tsl::robin_map<uint32_t, std::unique_ptr<Fetch>> fetches;
  tsl::robin_map<uint32_t, uint32_t> joined;        // every member in flight -> its fetch's key
  uint64_t ahead_bytes = 0;                         // the fetch-ahead block in use (0: off)
  std::vector<mpi::Request> abandoned;              // sends nobody waits for, tested until done
  std::vector<std::unique_ptr<Attempt>> set_aside;  // timed out, until MPI lets go of them
  std::vector<uint32_t> fetch_keys;                 // ProgressFetches' snapshot of `fetches`
  std::vector<Clock::time_point> suspect_until;

  NodeCache arena;               // members fetched before, shared with the node's processes
  uint64_t fetchable_bytes = 0;  // what this node may fetch (an upper bound): allocated ahead
  bool arena_failed = false;

  bool withdrawn = false;  // Withdraw has run: every MPI request is freed or completed
  mpi::Request barrier = mpi::kNoRequest;
  bool in_barrier = false;

  // A key's member (its entry, or the member a piece is of) and where its stored bytes are in
  // the blob; false for a key that is neither a file nor a piece.
  struct KeyRange {
    uint32_t member;
    uint64_t piece;           // kWhole for a member's own key
    uint64_t offset, length;  // in the partition blob
  };
  static constexpr uint64_t kWhole = ~uint64_t{0};
  bool RangeOf(uint32_t key, KeyRange* out) const;
  std::string Name(uint32_t key) const;  // for messages: the path, and the piece

  void Count(uint64_t AgentStats::*field, uint64_t n = 1) {
    std::lock_guard<std::mutex> lk(stats_mu);
    stats.*field += n;
  }

  Status OpenStorage(uint32_t entries, uint64_t fetchable);
  void AllocateCacheAhead();
  Status Open(meta::NamespaceView view);
  void Run();
  // Sends a reply (and a descriptor when fd >= 0: the member is in that file) on a client
  // connection; a client that has gone away is not an error for the agent.
  static void Reply(int conn, int32_t status, int fd);
  void PostRequest(int i) {
    mpi::World().Irecv(&posted_req[i], sizeof(RemoteRequest), mpi::kAnySource, kTagRequest,
                       &server_handles[i]);
  }
  bool ProgressServer();
  // Whether partition p is copied while CMD runs and the agent has not moved to its copy.
  bool BeingCopied(uint32_t p) const {
    return landing.valid() && p < moved.size() && !cfg.copy_paths[p].empty() && !moved[p];
  }
  bool MustWait(const RemoteRequest& req);
  bool ProgressLanding();
  bool MoveToCopy(uint32_t p);
  int SourceFd(uint32_t p, uint64_t off, uint64_t len, bool* from_map);
  const uint8_t* Resident(uint32_t p, uint64_t off, uint64_t len);
  std::vector<unsigned char> mincore_vec;
  void Serve(const RemoteRequest& req, int source);
  bool ProgressFetches();
  // A fetch of `entry` (a key) for the waiter, or ahead of any (w == nullptr).
  void StartFetch(uint32_t entry, const Waiter* w);
  void PieceAhead(uint32_t key, const KeyRange& kr);
  std::vector<Member> RangeAround(uint32_t entry);
  bool Verify(Fetch& f);
  void CheckAhead();
  int32_t SendToNextOwner(Fetch& f);
  std::unique_ptr<Attempt> NewAttempt(const Fetch& f);
  void SetAside(std::unique_ptr<Attempt> a);
  void TestLeftovers();
  bool TestOutgoing();
  void Complete(Fetch& f, int32_t status);
  void HandleClient(int conn);
  void Accept();
  int MakeCopy(uint32_t entry, const uint8_t* bytes, uint64_t len);
  void BroadcastStop();
  void DropWaiter(int conn);
  void Withdraw();
};

}  // namespace fanstore::io
