// The client side of the node agent (io/protocol.h): members that only other nodes hold.
// A member fetched before is found in the node cache arena (io/node_cache.h), which each
// process maps once, and copied out with no system call; only a miss asks this node's agent
// over its UNIX socket, one connection per thread (re-made in a forked child). Raw system
// calls only: this runs inside the hook. Bounded: an agent that does not answer within
// FANSTORE_AGENT_TIMEOUT seconds gives EIO (and a fresh connection next time).
// Thread-safety: per-thread state; safe from any thread, never from a vfork child.
#pragma once

#include <cstdint>

namespace fanstore::runtime {

// Where a remote member's stored bytes are on this node: in the arena (`bytes`: use them,
// then check RemoteStill(entry, word); false means they were evicted meanwhile and the copy
// must be made again), or in a private file at offset 0 (`fd`, the caller closes it).
struct RemoteSource {
  const uint8_t* bytes = nullptr;
  uint64_t word = 0;
  int fd = -1;
};

// `want_fd`: a file even if the member is in the arena (mmap needs one). 0 or a negative errno.
long FetchRemote(uint32_t entry, bool want_fd, RemoteSource* out);
// Large members (io/pieces.h) are read by the piece instead: true when `entry` is one.
bool RemotePieced(uint32_t entry);
// Piece p of a pieced member (its io::PieceLength bytes), as FetchRemote gives a member;
// check RemoteStill(RemotePieceKey(entry, p), word) after using arena bytes.
long FetchRemotePiece(uint32_t entry, uint64_t p, bool want_fd, RemoteSource* out);
uint32_t RemotePieceKey(uint32_t entry, uint64_t p);
// `key`: a member's entry, or a piece's key.
bool RemoteStill(uint32_t key, uint64_t word);
// The node cache's size (its arena's data bytes; 0 when this process has none).
uint64_t NodeCacheBytes();

}  // namespace fanstore::runtime
