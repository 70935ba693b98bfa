// Large members fetched from other nodes in pieces. A member whose stored bytes are over
// kPiecedAbove (8 MiB) is never fetched whole for a read: each read fetches only the
// kPieceBytes (1 MiB) pieces of its stored bytes that it touches, and each piece is a
// member of its own in the node cache (io/node_cache.h), under a key past the namespace's
// entries. So a 4 KiB read of a 300 MB member held elsewhere moves 1 MiB, not 300 MB
// (0.5 s), and a member of any size can be read within --timeout.
//
// The keys: entries [0, ns.size()) are themselves; then the pieces of every pieced member
// in entry order, each member's pieces one after another. The agent and every process
// derive the same numbering from the same namespace image, so they never exchange it.
// A mapping of a pieced member (which needs a descriptor of the whole) is still fetched
// whole, as a private copy.
// Thread-safety: immutable once built.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "meta/namespace_image.h"

namespace fanstore::io {

// 1 MiB: reading in order ran as fast as with 4 MiB pieces (the next piece comes ahead),
// and a reader at random offsets moves a quarter of the bytes (docs/design.md).
inline constexpr uint64_t kPieceBytes = 1ull << 20;
inline constexpr uint64_t kPiecedAbove = 8ull << 20;
static_assert(kPiecedAbove >= 2 * kPieceBytes, "KeysAtMost's bound needs over 2 pieces a member");

inline bool Pieced(const meta::ImageEntry& e) {
  return e.kind == static_cast<uint8_t>(meta::Kind::kFile) && e.stored_size > kPiecedAbove;
}
inline uint64_t PieceCount(uint64_t stored) {
  return (stored + kPieceBytes - 1) / kPieceBytes;
}
// Piece p of a member of `stored` bytes: its offset and length in the stored bytes.
inline uint64_t PieceOffset(uint64_t p) {
  return p * kPieceBytes;
}
inline uint64_t PieceLength(uint64_t stored, uint64_t p) {
  return std::min(kPieceBytes, stored - p * kPieceBytes);
}
// The most keys a namespace of `entries` entries and `stored` stored bytes in all can need:
// a pieced member of s bytes (s > 2 pieces) has ceil(s / piece) < 1.5 s / piece pieces
// (with 8 pieces and more, fewer than 1.125 s / piece: the bound is loose, and cheap).
inline uint64_t KeysAtMost(uint64_t entries, uint64_t stored) {
  return entries + stored / kPieceBytes + stored / (2 * kPieceBytes) + 2;
}

class PieceIndex {
 public:
  // Numbers the pieces of `ns`. Where the keys would not fit 32 bits (a namespace of more
  // than ~16 PiB in large members), nothing is pieced and such members are fetched whole.
  void Build(const meta::NamespaceView& ns) {
    members_.clear();
    first_.clear();
    uint64_t next = ns.size();
    for (uint32_t i = 0; i < ns.size(); ++i) {
      const meta::ImageEntry& e = ns.entry(i);
      if (!Pieced(e)) continue;
      members_.push_back(i);
      first_.push_back(static_cast<uint32_t>(std::min<uint64_t>(next, UINT32_MAX)));
      next += PieceCount(e.stored_size);
    }
    entries_ = ns.size();
    if (next >= UINT32_MAX) {
      members_.clear();
      first_.clear();
      next = ns.size();
    }
    keys_ = next;
  }
  uint64_t keys() const { return keys_; }  // the node cache's table length
  bool enabled(uint32_t entry) const {
    return std::binary_search(members_.begin(), members_.end(), entry);
  }
  // The key of piece p of `entry`, which must be pieced (enabled) with p < its count.
  uint32_t Key(uint32_t entry, uint64_t p) const {
    const auto it = std::lower_bound(members_.begin(), members_.end(), entry);
    return first_[static_cast<size_t>(it - members_.begin())] + static_cast<uint32_t>(p);
  }
  // For a key past the entries: its member and piece. False for any other key.
  bool Split(uint64_t key, const meta::NamespaceView& ns, uint32_t* entry, uint64_t* p) const {
    if (key < entries_ || key >= keys_ || first_.empty()) return false;
    const auto it = std::upper_bound(first_.begin(), first_.end(), static_cast<uint32_t>(key)) - 1;
    *entry = members_[static_cast<size_t>(it - first_.begin())];
    *p = key - *it;
    return *p < PieceCount(ns.entry(*entry).stored_size);
  }
  // A key for messages: "'path'" for an entry, "'path' (piece N)" for a piece.
  std::string Name(uint64_t key, const meta::NamespaceView& ns) const {
    uint32_t entry = static_cast<uint32_t>(key);
    uint64_t p = 0;
    const bool piece = key >= ns.size();
    if (piece && !Split(key, ns, &entry, &p)) return "key " + std::to_string(key);
    // (appended piece by piece: gcc 12 at -O3 sees a false -Wrestrict in "'" + s + "'")
    std::string name = "'";
    name += ns.path(ns.entry(entry));
    name += '\'';
    if (piece) name += " (piece " + std::to_string(p) + ")";
    return name;
  }

 private:
  std::vector<uint32_t> members_;  // pieced entries, ascending
  std::vector<uint32_t> first_;    // the key of each one's first piece
  uint64_t entries_ = 0, keys_ = 0;
};

}  // namespace fanstore::io
