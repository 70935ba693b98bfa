// Which raw members, and which blocks of large ones, this node has checked against their
// CRC32C. A raw member's bytes are served straight from its blob (or a staged copy, the
// node cache, another node), so the check is paid once per node: the first read that takes
// a member whole checks the bytes it read, any other first read (a range, a mapping) reads
// the member once to check it; a member stored with a checksum per 1 MiB block
// (Codec::kRawBlocks, meta/blocks.h) is checked block by block instead, only the blocks a
// read or a mapping touches. Either is marked here, and every later read of the node's
// processes trusts the mark. The marks are bitmaps in a file fanrun makes beside the
// namespace image (`verified`, in its private directory), mapped shared by every process
// of the node; without one (a file not made by this user, no room), each process keeps its
// own and checks each member or block once itself. Damaged bytes are never marked: every
// read of them is EIO.
//
// The file (VerifiedLayout): a bit per entry; a count n and n words `entry << 32 | first`,
// one per member with block checksums in entry order, `first` the number of its first
// block's bit; a bit per block of those members.
// Thread-safety: any thread; a mark is one atomic OR (relaxed: a mark only says that some
// process saw the bytes match, and orders nothing else). Never from a vfork child (the
// private fallback is made at start-up or by the first block query, never in one).
#pragma once

#include <cstdint>
#include <string>

#include "meta/blocks.h"
#include "meta/format.h"
#include "meta/namespace_image.h"

namespace fanstore::runtime {

// The bitmap file fanrun makes beside `image_path` (the namespace image). (Inline: fanrun
// uses it and the layout below without linking the runtime.)
inline std::string VerifiedPathBeside(const std::string& image_path) {
  return image_path.substr(0, image_path.rfind('/') + 1) + "verified";
}
// Bytes of a bitmap for `entries` members (whole 64-bit words).
inline uint64_t VerifiedBytes(uint64_t entries) {
  return (entries + 63) / 64 * 8;
}

struct VerifiedLayout {
  uint64_t entries = 0;  // bits of members
  uint64_t indexed = 0;  // members with block checksums
  uint64_t blocks = 0;   // bits of their blocks
  uint64_t index_off() const { return VerifiedBytes(entries); }
  uint64_t bits_off() const { return index_off() + 8 + 8 * indexed; }
  uint64_t bytes() const { return bits_off() + VerifiedBytes(blocks); }
};

// Calls add(entry, first) for each member of `ns` with block checksums, in entry order, and
// returns the layout of the file (or of the private marks) for `ns`.
template <class Add>
VerifiedLayout ForEachBlockedMember(const meta::NamespaceView& ns, Add&& add) {
  VerifiedLayout l;
  l.entries = ns.size();
  for (uint32_t i = 0; i < ns.size(); ++i) {
    const meta::ImageEntry& e = ns.entry(i);
    if (e.kind != static_cast<uint8_t>(meta::Kind::kFile) ||
        e.codec != static_cast<uint8_t>(meta::Codec::kRawBlocks))
      continue;
    add(i, l.blocks);
    ++l.indexed;
    l.blocks += meta::BlockCount(e.size);
  }
  return l;
}

// Maps the node's marks at `path` (checked: a regular file of this user's, not writable by
// others, as long as its layout says), or keeps private ones. Called once by Init.
void AttachVerified(const std::string& path, const meta::NamespaceView& ns);
// Whether member `entry`'s bytes were checked on this node (false before AttachVerified).
bool IsVerified(uint32_t entry);
void MarkVerified(uint32_t entry);
// The same for block `block` of a member with block checksums (false, and no mark, for any
// other entry or a block past its end).
bool IsBlockVerified(uint32_t entry, uint64_t block);
void MarkBlockVerified(uint32_t entry, uint64_t block);
// True when the marks are the node's (shared), false for private ones: for --stats.
bool VerifiedShared();

}  // namespace fanstore::runtime
