// Raw members with a checksum per block (Codec::kRawBlocks, meta/blocks.h): a read or a
// mapping of part of one checks only the 1 MiB blocks it touches, each once per node
// (runtime/data/verified.h), so a random page read into a database of gigabytes costs one
// block's check the first time, not the whole member's. A block not checked yet is read
// whole, checked, marked, and the caller's bytes are copied from what was checked (never
// read again from the blob after the check).
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "compress/crc32c.h"
#include "meta/blocks.h"
#include "meta/endian.h"
#include "meta/format.h"
#include "runtime/data/member_io.h"
#include "runtime/data/member_io_parts.h"
#include "runtime/data/member_source.h"
#include "runtime/data/verified.h"
#include "runtime/process/state.h"

namespace fanstore::runtime {

using meta::ImageEntry;
using meta::kDeflateBlockBytes;

namespace {

// Block b of `entry` into `out` (BlockPlainBytes long), checked against its stored
// checksum and marked: its length, or a negative errno (EIO, logged, when damaged).
long LoadCheckedBlock(State& s, uint32_t entry, uint64_t b, uint8_t* out) {
  const ImageEntry& e = s.ns.entry(entry);
  const uint64_t len = meta::BlockPlainBytes(e.size, b);
  return WithSource(entry, [&](const MemberSource& src) -> long {
    uint8_t crc_buf[meta::kRawBlockCrcBytes];
    long err = 0;
    const uint8_t* crc = src.ViewOrRead(meta::RawBlockCrcOffset(e.size, b), sizeof crc_buf, crc_buf,
                                        ViewRule::kAny, &err);
    if (!crc) return err;
    const uint32_t want = meta::GetU32(crc);
    const uint8_t* bytes = src.View(b * kDeflateBlockBytes, len, ViewRule::kRange);
    if (bytes) {
      std::memcpy(out, bytes, len);
    } else if (const long r = src.Read(b * kDeflateBlockBytes, len, out); r < 0) {
      return r;
    }
    if (!src.Still()) return kStale;
    g_io.raw_checks.Add(1);
    if (compress::Crc32c(0, out, len) != want)
      return Damaged(s, e, "checksum mismatch (damaged data)", b);
    MarkBlockVerified(entry, b);
    return static_cast<long>(len);
  });
}

}  // namespace

long ReadRawBlocks(State& s, uint32_t entry, uint64_t off, uint8_t* dst, size_t n) {
  const ImageEntry& e = s.ns.entry(entry);
  std::shared_ptr<Bytes> buf;
  size_t done = 0;
  while (done < n) {
    const uint64_t at = off + done, b = at / kDeflateBlockBytes, start = b * kDeflateBlockBytes;
    // Checked blocks that follow each other are read in one go.
    uint64_t end = start + meta::BlockPlainBytes(e.size, b);
    const bool checked = !s.verify_every_read && IsBlockVerified(entry, b);
    if (checked)
      while (end < off + n && IsBlockVerified(entry, end / kDeflateBlockBytes))
        end += meta::BlockPlainBytes(e.size, end / kDeflateBlockBytes);
    const size_t take = static_cast<size_t>(std::min<uint64_t>(end, off + n) - at);
    if (checked) {
      const long r = ReadStored(entry, at, dst + done, take);
      if (r < 0) return r;
      if (static_cast<size_t>(r) != take) return Damaged(s, e, "member shorter than packed");
    } else {
      if (!buf && !(buf = NewBuffer(kDeflateBlockBytes))) return -ENOMEM;
      const long r = LoadCheckedBlock(s, entry, b, buf->data());
      if (r < 0) return r;
      std::memcpy(dst + done, buf->data() + (at - start), take);
    }
    done += take;
  }
  return static_cast<long>(n);
}

long CheckRawBlocks(State& s, uint32_t entry, uint64_t off, uint64_t n) {
  const ImageEntry& e = s.ns.entry(entry);
  if (off >= e.size || n == 0) return 0;
  const uint64_t last = (std::min(e.size, off + n) - 1) / kDeflateBlockBytes;
  std::shared_ptr<Bytes> buf;
  for (uint64_t b = off / kDeflateBlockBytes; b <= last; ++b) {
    if (IsBlockVerified(entry, b)) continue;
    if (!buf && !(buf = NewBuffer(kDeflateBlockBytes))) return -ENOMEM;
    if (const long r = LoadCheckedBlock(s, entry, b, buf->data()); r < 0) return r;
  }
  return 0;
}

}  // namespace fanstore::runtime
