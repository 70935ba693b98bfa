// The node agent's two protocols. Thread-safety: types and constants only.
//
// Local (application process <-> agent of its node): a SOCK_SEQPACKET UNIX socket, one
// connection per process and thread, used only on a miss: a process first looks a member up
// in the node cache arena it maps (io/node_cache.h) and copies a hit out itself. A request is
// a LocalRequest; the reply is a LocalReply. For kFetch, status 0 means the member is in the
// arena now (kInArena) or, for a member too large to keep, in the one file descriptor sent
// with the reply (kInFile, SCM_RIGHTS: a private memfd holding the stored bytes from offset
// 0). kFetchCopy always answers kInFile: a process asks for it when a member it was told
// is in the arena was evicted again before it could copy it (a cache far smaller than the
// working set), or when it needs a descriptor (mmap). Compressed members stay compressed:
// the reader inflates and checks them exactly as it does a local member.
//
// Remote (agent <-> agent, over MPI): a RemoteRequest with tag kTagRequest asks for a byte
// range of a partition blob: the member a process waits for (at `focus` in the range) and,
// fetched ahead into the node cache, the members around it in the blob
// (AgentConfig::fetch_ahead). The owner
// answers on the request's reply tag with a RemoteReplyHeader, then exactly
// ceil(length / kRemoteChunk) data messages of kRemoteChunk bytes (the last one shorter),
// empty when the header's status is an error, so the requester can post every receive at
// once. MPI keeps their order. The bytes are checked before anything lands in the node
// cache, against each raw member's CRC32C in the namespace (end to end: a member damaged in
// the holder's blob is caught too) and, when the range holds a compressed member, against
// the CRC32C of the whole range that the header carries; a mismatch in a member a process
// waits for is asked for once more (a damaged neighbour is only left out of the cache).
#pragma once

#include <cstdint>

namespace fanstore::io {

enum class LocalOp : uint32_t { kFetch = 1, kStop = 2, kPing = 3, kFetchCopy = 5 };

struct LocalRequest {
  LocalOp op;
  // kFetch, kFetchCopy: a namespace image entry, or the node cache key of a piece of a
  // large member (io/pieces.h: past the entries), which is fetched alone
  uint32_t entry;
};

enum class Where : uint32_t { kInArena = 0, kInFile = 1 };
struct LocalReply {
  int32_t status;  // 0 or a negative errno
  Where where;
};

inline constexpr int kTagRequest = 1;
inline constexpr int kTagStop = 2;
inline constexpr int kFirstReplyTag = 16;
inline constexpr uint64_t kRemoteChunk = 64ull << 20;
inline uint64_t RemoteChunks(uint64_t length) {
  return (length + kRemoteChunk - 1) / kRemoteChunk;
}

struct RemoteRequest {
  uint32_t partition;
  int32_t reply_tag;
  uint64_t offset;  // in the partition blob
  uint64_t length;  // stored bytes
  uint32_t flags;   // kNoTransferCrc
  uint32_t focus;   // where in the range the member a process waits for starts
};
// Only raw members: the requester checks each against its CRC32C in the namespace (which
// also catches a member damaged in the holder's blob), so the holder computes none.
inline constexpr uint32_t kNoTransferCrc = 1;

struct RemoteReplyHeader {
  int32_t status;   // 0 or a negative errno
  uint32_t crc32c;  // of the `length` bytes that follow (0 with kNoTransferCrc)
  uint64_t length;
};

}  // namespace fanstore::io
