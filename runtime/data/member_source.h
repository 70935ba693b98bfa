// Where one member's stored bytes come from, chosen once per attempt at a read, and the one
// way to get them. MemberSource::Open picks the kind:
//   kBlob    this node holds the member's partition: its blob (or staged copy) at the
//            member's offset; bytes are copied from the blob's mapping where that pays
//            (runtime/data/member_io_parts.h ResidentView), else read (PreadBlob)
//   kArena   another node holds it and it is in this node's cache arena: copied from there,
//            valid while Still() (the arena may evict it meanwhile)
//   kFile    a private copy the agent wrote (asked for a descriptor, or no room in the
//            arena): read from offset 0; closed with the source
//   kPieces  a large member another node holds: fetched piece by piece (io/pieces.h) as
//            it is read, each piece from the arena or a private file
// WithSource is the one policy for a source that went stale: the read is made again on a
// fresh source, up to kAttempts times, the last one asking for a private copy; a read still
// stale after that is EIO. The loaders (member_io.cc, member_blocks.cc) and the mmap handler
// all read through it. The remote kinds take their agent calls from RemoteCalls, which a
// test replaces with doubles.
// Thread-safety: a source belongs to one read on one thread; Open from any thread, never
// from a vfork child.
#pragma once

#include <sys/types.h>

#include <cerrno>
#include <cstdint>

#include "runtime/data/remote.h"

namespace fanstore::runtime {

// A read whose arena bytes were evicted while it used them.
inline constexpr long kStale = -ESTALE;
inline constexpr int kAttempts = 4;

// The node agent's client calls the remote kinds make (remote.h's by default).
struct RemoteCalls {
  long (*fetch)(uint32_t entry, bool want_fd, RemoteSource* out) = FetchRemote;
  long (*fetch_piece)(uint32_t entry, uint64_t p, bool want_fd,
                      RemoteSource* out) = FetchRemotePiece;
  uint32_t (*piece_key)(uint32_t entry, uint64_t p) = RemotePieceKey;
  bool (*still)(uint32_t key, uint64_t word) = RemoteStill;
  bool (*pieced)(uint32_t entry) = RemotePieced;
};
// The calls in use (tests set their own, and put the defaults back).
RemoteCalls& Remote();

// How a view of blob bytes is decided (ResidentView's rules):
enum class ViewRule : uint8_t {
  kWhole,  // the whole member, the first read of it in this process being a read
  kRange,  // a range of a large member: short ones by the 64 KiB region rule
  kAny,    // any part, whenever the pages are cached (block tables, block streams)
};

class MemberSource {
 public:
  enum class Kind : uint8_t { kNone, kBlob, kArena, kFile, kPieces };

  // The source of `entry` (0 or a negative errno). `want_fd`: a descriptor even for a member
  // in the arena or read by the piece (a mapping needs one).
  static long Open(uint32_t entry, bool want_fd, MemberSource* out);
  // Each kind from its parts, for Open and for tests.
  static MemberSource Blob(int fd, uint64_t base, uint32_t partition, uint32_t entry);
  static MemberSource Arena(const uint8_t* bytes, uint64_t word, uint32_t entry);
  static MemberSource File(int fd, uint32_t entry);
  static MemberSource Pieces(uint32_t entry, uint64_t stored_size);

  MemberSource() = default;
  MemberSource(MemberSource&& o) noexcept { *this = static_cast<MemberSource&&>(o); }
  MemberSource& operator=(MemberSource&& o) noexcept;
  MemberSource(const MemberSource&) = delete;
  MemberSource& operator=(const MemberSource&) = delete;
  ~MemberSource();

  Kind kind() const { return kind_; }
  // The descriptor holding the stored bytes from base() on (kBlob, kFile), else -1.
  int fd() const { return fd_; }
  uint64_t base() const { return base_; }

  // Stored bytes [off, off + n) in memory, when they are (the arena) or copying them from
  // the blob's mapping pays (`rule`); else nullptr, and the caller reads them.
  const uint8_t* View(uint64_t off, size_t n, ViewRule rule) const;
  // Reads stored bytes [off, off + n) into `dst`: n, or a negative errno (EIO: the source
  // ends early; kStale: a piece evicted on every attempt).
  long Read(uint64_t off, size_t n, uint8_t* dst) const;
  // A view if there is one, else read into `buf` (n bytes): the bytes, or nullptr with
  // *err set.
  const uint8_t* ViewOrRead(uint64_t off, size_t n, uint8_t* buf, ViewRule rule, long* err) const;
  // Whether arena bytes viewed or copied so far are still the member's (true for the others):
  // a read that used them returns kStale when not.
  bool Still() const;

 private:
  MemberSource(Kind kind, int fd, uint64_t base, const uint8_t* bytes, uint64_t word,
               uint32_t partition, uint32_t entry)
      : kind_(kind),
        fd_(fd),
        base_(base),
        bytes_(bytes),
        word_(word),
        partition_(partition),
        entry_(entry) {}

  Kind kind_ = Kind::kNone;
  int fd_ = -1;
  uint64_t base_ = 0;  // kBlob: the member's offset in the blob; kPieces: stored size
  const uint8_t* bytes_ = nullptr;
  uint64_t word_ = 0;
  uint32_t partition_ = 0;
  uint32_t entry_ = 0;
};

// Runs `attempt(source)` on a fresh source of `entry` until it returns anything but kStale,
// at most kAttempts times (the last source asked with want_fd); kStale at the end is -EIO.
// A failure to open the source is returned as it is.
template <typename Attempt>
long WithSource(uint32_t entry, Attempt&& attempt, bool want_fd = false) {
  for (int i = 0; i < kAttempts; ++i) {
    MemberSource src;
    if (const long rc = MemberSource::Open(entry, want_fd || i == kAttempts - 1, &src); rc < 0)
      return rc;
    const long r = attempt(src);
    if (r != kStale) return r;
  }
  return -EIO;
}

}  // namespace fanstore::runtime
