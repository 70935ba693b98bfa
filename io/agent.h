// The node agent: the part of each fanrun rank that serves other nodes' reads of the
// partitions it holds (over MPI) and fetches remote members for this node's application
// processes (over a UNIX socket, io/protocol.h), into the node cache arena that those
// processes map (io/node_cache.h; bounded, FIFO with a second chance).
//
// One thread runs everything (an event loop over MPI requests and the socket): it is the
// only thread that calls MPI, several fetches and replies are in flight at once, and
// concurrent requests for one member are fetched once. When idle it sleeps in epoll with a
// short timeout instead of spinning in MPI progress, so a node's training processes keep
// their cores.
// Faults: a holder that does not answer within `timeout` is suspected for a while and the
// next holder (a replica) is asked; with none left the requests fail with EIO. A reply whose
// CRC32C does not match is asked for again once, then EIO.
// Thread-safety: Start/Finish/RequestStop/Stats from the owning thread; the loop thread owns
// every other member.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "meta/namespace_image.h"
#include "meta/placement.h"

namespace fanstore::io {

struct AgentConfig {
  bool mpi = true;  // false: one node without MPI (nothing is remote; the agent only listens)
  int rank = 0;
  meta::Placement placement;
  std::vector<std::string> blob_paths;  // per partition: this node's copy, "" if remote
  bool staged = false;  // the blobs are fanrun's own copies (nothing else truncates them)
  // Copies made while CMD runs (io/landing.h): the landing map's path ("" when none) and per
  // partition the copy's final path ("" if not copied). Until a copy is done its blob_paths
  // entry is DATA's, and a request for chunks that have not landed waits for them, asking
  // the copier for them (until the copy is stuck: LandingPatience): the shared file system
  // sees those bytes once, in the copier's large reads. Once done, replies come from the copy.
  std::string landing_path;
  std::vector<std::string> copy_paths;
  std::vector<uint8_t> broadcast;  // per partition
  std::string socket_path;         // the local socket to create
  std::string cache_dir;           // holds the node cache arena
  uint64_t cache_bytes = 1ull << 30;
  double timeout_s = 10;
  // A missed remote member is fetched with the members around it in its blob (the aligned
  // block of this many bytes that holds it, up to the node cache's largest member) so that
  // they are node-cache hits when they are read; 0 = only the member. Turned off for the rest
  // of the job when most members fetched ahead leave the cache unread (it is too small).
  uint64_t fetch_ahead = 1ull << 20;
  uint64_t corrupt_replies = 0;  // fault injection for tests: damage the first N replies sent
  bool silent = false;           // fault injection for tests: take requests and never answer them
};

struct AgentStats {
  uint64_t served = 0, served_bytes = 0;         // remote requests this node answered
  uint64_t fetched = 0, fetched_bytes = 0;       // fetches from other nodes and their bytes
  uint64_t fetched_ahead = 0, ahead_unread = 0;  // members fetched before anyone asked, and
                                                 // those of them evicted unread
  uint64_t cache_hits = 0, deduplicated = 0;     // local requests answered without a fetch
                                                 // (most hits never reach the agent)
  uint64_t timeouts = 0, crc_retries = 0, failures = 0;
  uint64_t evictions = 0;
  uint64_t waited_for_copy = 0;  // requests answered once the copier had landed their chunks
  uint64_t gave_up_on_copy = 0;  // requests that stopped waiting for a stuck copy (DATA read)
};

class Agent {
 public:
  explicit Agent(AgentConfig cfg);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // The end of this node's stage-in, before the namespace exists: opens and maps this
  // node's blobs (populating staged copies) and creates the node cache for `entries`
  // namespace entries (the manifest's count). `fetchable`: what this node may fetch (an
  // upper bound), for AllocateCacheAhead. Calls no MPI. Byte-proportional work, so it is
  // part of the stage-in, not of the namespace's start-up.
  Status OpenStorage(uint32_t entries, uint64_t fetchable);
  // Once every node of this host has staged (their copies must not meet a cache that took
  // the room first): allocates the node cache ahead up to `fetchable` bytes, at most
  // --cache-size. No room is a warning, not an error. With copies made while CMD runs the
  // loop does this itself once they have ended.
  void AllocateCacheAhead();
  // With the namespace: creates the socket, posts the receives (a namespace of another size
  // than `entries` gets its node cache made again). No thread yet: the caller may still use
  // MPI (MPI_THREAD_SERIALIZED) until Start.
  Status Open(meta::NamespaceView ns);
  // Starts the loop thread; from here on it is the only caller of MPI until Finish returns.
  void Start();
  bool running() const { return thread_.joinable(); }
  // The end of this rank's work (wrap mode: CMD has exited). Keeps serving the other ranks
  // until every rank has finished, then returns (all ranks leave together).
  void Finish();
  // Serve mode: ends the whole job (every rank) as `fanrun stop` does, then waits like Finish.
  void RequestStop();
  // The same from a signal handler (async-signal-safe); returns at once.
  void RequestStopFromSignal();
  // Blocks until the job was stopped (by RequestStop, a local stop request or another rank).
  void WaitUntilStopped();
  AgentStats Stats() const;

  struct Loop;

 private:
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
};

}  // namespace fanstore::io
