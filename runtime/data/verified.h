// Which raw members this node has checked against their CRC32C. A raw member's bytes are
// served straight from its blob (or a staged copy, the node cache, another node), so the
// check is paid once per member per node: the first read that takes the member whole
// checks the bytes it read, any other first read (a range, a mapping) reads the member
// once to check it; either marks the member here, and every later read of the node's
// processes trusts the mark. The marks are a bitmap in a file fanrun makes beside the
// namespace image (`verified`, in its private directory), mapped shared by every process
// of the node; without one (a file not made by this user, no room), each process keeps
// its own and checks each member once itself. A damaged member is never marked: every
// read of it is EIO.
// Thread-safety: any thread; a mark is one atomic OR (relaxed: a mark only says that some
// process saw the bytes match, and orders nothing else). Never from a vfork child (the
// private fallback is made at start-up, so none is needed there).
#pragma once

#include <cstdint>
#include <string>

namespace fanstore::runtime {

// The bitmap file fanrun makes beside `image_path` (the namespace image). (Inline: fanrun
// uses it and the sizes below without linking the runtime.)
inline std::string VerifiedPathBeside(const std::string& image_path) {
  return image_path.substr(0, image_path.rfind('/') + 1) + "verified";
}
// Bytes of a bitmap for `entries` members (whole 64-bit words).
inline uint64_t VerifiedBytes(uint64_t entries) {
  return (entries + 63) / 64 * 8;
}

// Maps the node's bitmap at `path` (checked: a regular file of this user's, not writable
// by others, at least VerifiedBytes(entries) long), or a private one. Called once by Init.
void AttachVerified(const std::string& path, uint64_t entries);
// Whether member `entry`'s bytes were checked on this node (false before AttachVerified).
bool IsVerified(uint32_t entry);
void MarkVerified(uint32_t entry);
// True when the marks are the node's (shared), false for a private bitmap: for --stats.
bool VerifiedShared();

}  // namespace fanstore::runtime
