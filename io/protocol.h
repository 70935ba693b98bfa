// The node agent's two protocols.
//
// Local (application process <-> agent of its node): a SOCK_SEQPACKET UNIX socket, one
// connection per process and thread. A process first opens <cache dir>/<entry> itself (a
// member fetched before) and then only sends kTouch; otherwise it sends kFetch. A request
// is a LocalRequest; the reply to kFetch/kStop/kPing is a LocalReply
// and, when status == 0, one file descriptor (SCM_RIGHTS) of a node-local file holding the
// member's stored bytes from offset 0 (compressed members stay compressed: the reader
// inflates and checks them exactly as it does a local member).
//
// Remote (agent <-> agent, over MPI): a RemoteRequest with tag kTagRequest; the owner
// answers on the request's reply tag with a RemoteReplyHeader followed by the first bytes,
// then further chunks of at most kRemoteChunk bytes on the same tag (MPI keeps their order).
// The header carries the CRC32C of all stored bytes sent, so a damaged transfer is caught
// (and retried once) before anything lands in the node cache.
#pragma once

#include <cstdint>

namespace fanstore::io {

// kTouch: "I read these cached members" (a TouchBatch, no reply), sent by a process that
// found members in the node cache directory itself, every kTouchBatch hits (one wake-up of
// the agent per batch, not per read), so the agent's LRU order follows all uses.
enum class LocalOp : uint32_t { kFetch = 1, kStop = 2, kPing = 3, kTouch = 4 };

struct LocalRequest {
  LocalOp op;
  uint32_t entry;  // namespace image entry (kFetch)
};

inline constexpr uint32_t kTouchBatch = 32;
struct TouchBatch {
  LocalOp op;  // kTouch
  uint32_t count;
  uint32_t entries[kTouchBatch];
};

struct LocalReply {
  int32_t status;  // 0 or a negative errno
  uint32_t reserved;
};

inline constexpr int kTagRequest = 1;
inline constexpr int kTagStop = 2;
inline constexpr int kFirstReplyTag = 16;
inline constexpr uint64_t kRemoteChunk = 64ull << 20;

struct RemoteRequest {
  uint32_t partition;
  int32_t reply_tag;
  uint64_t offset;  // in the partition blob
  uint64_t length;  // stored bytes
};

struct RemoteReplyHeader {
  int32_t status;  // 0 or a negative errno
  uint32_t crc32c;  // of the `length` stored bytes that follow
  uint64_t length;
};

}  // namespace fanstore::io
