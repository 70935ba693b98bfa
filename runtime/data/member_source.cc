#include "runtime/data/member_source.h"

#include <sys/syscall.h>

#include <algorithm>
#include <cstring>

#include "base/raw_syscall.h"
#include "io/pieces.h"
#include "meta/format.h"
#include "runtime/data/member_io_parts.h"
#include "runtime/process/state.h"

namespace fanstore::runtime {

RemoteCalls& Remote() {
  static RemoteCalls calls;
  return calls;
}

long MemberSource::Open(uint32_t entry, bool want_fd, MemberSource* out) {
  State& s = *Get();
  const meta::ImageEntry& e = s.ns.entry(entry);
  if (!s.parts[e.partition].empty()) {
    const int fd = s.BlobFd(e.partition);
    if (fd < 0) return fd;
    *out = Blob(fd, e.data_offset, e.partition, entry);
    return 0;
  }
  g_io.remote.Add(1);
  if (!want_fd && Remote().pieced(entry)) {
    *out = Pieces(entry, e.stored_size);
    return 0;
  }
  RemoteSource r;
  if (const long rc = Remote().fetch(entry, want_fd, &r); rc < 0) return rc;
  if (r.bytes) {
    g_io.arena.Add(1);
    *out = Arena(r.bytes, r.word, entry);
  } else {
    *out = File(r.fd, entry);
  }
  return 0;
}

MemberSource MemberSource::Blob(int fd, uint64_t base, uint32_t partition, uint32_t entry) {
  return {Kind::kBlob, fd, base, nullptr, 0, partition, entry};
}
MemberSource MemberSource::Arena(const uint8_t* bytes, uint64_t word, uint32_t entry) {
  return {Kind::kArena, -1, 0, bytes, word, 0, entry};
}
MemberSource MemberSource::File(int fd, uint32_t entry) {
  return {Kind::kFile, fd, 0, nullptr, 0, 0, entry};
}
MemberSource MemberSource::Pieces(uint32_t entry, uint64_t stored_size) {
  return {Kind::kPieces, -1, stored_size, nullptr, 0, 0, entry};
}

MemberSource& MemberSource::operator=(MemberSource&& o) noexcept {
  if (this != &o) {
    this->~MemberSource();
    kind_ = o.kind_;
    fd_ = o.fd_;
    base_ = o.base_;
    bytes_ = o.bytes_;
    word_ = o.word_;
    partition_ = o.partition_;
    entry_ = o.entry_;
    o.kind_ = Kind::kNone;
    o.fd_ = -1;
  }
  return *this;
}

MemberSource::~MemberSource() {
  if (kind_ == Kind::kFile && fd_ >= 0) base::RawSyscall6(SYS_close, fd_);
  kind_ = Kind::kNone;
  fd_ = -1;
}

const uint8_t* MemberSource::View(uint64_t off, size_t n, ViewRule rule) const {
  if (kind_ == Kind::kArena) return bytes_ + off;
  if (kind_ != Kind::kBlob) return nullptr;
  State& s = *Get();
  switch (rule) {
    case ViewRule::kWhole:
      return ResidentView(s, partition_, base_ + off, n, entry_);
    case ViewRule::kAny:
      return ResidentView(s, partition_, base_ + off, n, meta::kNoEntry);
    case ViewRule::kRange: {
      // A short range of a blob that needs the page check takes the region rule (the first
      // read of a 64 KiB region in a process is a read); a staged blob, or a long range,
      // is copied from the mapping whenever it is cached.
      if (!s.mapped_reads) return nullptr;
      uint64_t blob_size = 0;
      bool resident = false;
      const bool region_rule =
          n <= kRegionRuleMax && s.BlobMap(partition_, &blob_size, &resident) && !resident;
      const bool before = region_rule && RegionsReadBefore(partition_, base_ + off, n);
      if (region_rule && !before) return nullptr;
      return ResidentView(s, partition_, base_ + off, n, meta::kNoEntry, before);
    }
  }
  return nullptr;
}

long MemberSource::Read(uint64_t off, size_t n, uint8_t* dst) const {
  switch (kind_) {
    case Kind::kBlob:
      if (State& s = *Get(); !s.BlobSettled(partition_)) {  // copied while CMD runs
        if (const long r = ReadLanded(s, partition_, dst, n, base_ + off); r != kNotLanded)
          return r;
      }
      return PreadBlob(fd_, dst, n, base_ + off, partition_);
    case Kind::kFile:
      return PreadBlob(fd_, dst, n, off);
    case Kind::kArena:
      CopyOut(dst, bytes_ + off, n);
      return static_cast<long>(n);
    case Kind::kPieces:
      break;
    case Kind::kNone:
      return -EBADF;
  }
  // Each piece the range touches: from the arena, or fetched into it by the agent; a piece
  // evicted while it was copied is copied again, the last time into a private file.
  size_t done = 0;
  while (done < n) {
    const uint64_t pos = off + done, p = pos / io::kPieceBytes, in = pos - io::PieceOffset(p);
    const size_t take =
        static_cast<size_t>(std::min<uint64_t>(n - done, io::PieceLength(base_, p) - in));
    long r = kStale;
    for (int i = 0; r == kStale && i < kAttempts; ++i) {
      RemoteSource src;
      if (const long rc = Remote().fetch_piece(entry_, p, i == kAttempts - 1, &src); rc < 0)
        return rc;
      if (src.bytes) {
        g_io.arena.Add(1);
        CopyOut(dst + done, src.bytes + in, take);
        r = Remote().still(Remote().piece_key(entry_, p), src.word) ? static_cast<long>(take)
                                                                    : kStale;
      } else {
        r = PreadBlob(src.fd, dst + done, take, in);
        base::RawSyscall6(SYS_close, src.fd);
      }
    }
    if (r < 0) return r == kStale ? -EIO : r;
    done += take;
  }
  return static_cast<long>(n);
}

const uint8_t* MemberSource::ViewOrRead(uint64_t off, size_t n, uint8_t* buf, ViewRule rule,
                                        long* err) const {
  if (const uint8_t* v = View(off, n, rule)) return v;
  const long r = Read(off, n, buf);
  if (r < 0) {
    *err = r;
    return nullptr;
  }
  return buf;
}

bool MemberSource::Still() const {
  return kind_ != Kind::kArena || Remote().still(entry_, word_);
}

}  // namespace fanstore::runtime
