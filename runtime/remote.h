// The client side of the node agent (io/protocol.h): members that only other nodes hold are
// asked of this node's agent over its UNIX socket, one connection per thread (re-made in a
// forked child), and arrive as a descriptor of a node-cache file holding the stored bytes.
// Raw system calls only: this runs inside the hook. Bounded: an agent that does not answer
// within FANSTORE_AGENT_TIMEOUT seconds gives EIO (and a fresh connection next time).
// Thread-safety: per-thread state; safe from any thread, never from a vfork child.
#pragma once

#include <cstdint>

namespace fanstore::runtime {

// A descriptor (the caller closes it) of the member's stored bytes at offset 0, or a
// negative errno.
long FetchRemote(uint32_t entry);

}  // namespace fanstore::runtime
