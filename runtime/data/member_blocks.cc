// Block-deflated members (meta/blocks.h): one block inflated and checked at a time, from
// the blob, the node cache or a remote owner, so that a read of part of a large member
// inflates only the blocks it touches, each once into the member cache.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <new>

#include "compress/crc32c.h"
#include "meta/blocks.h"
#include "meta/format.h"
#include "runtime/data/member_io.h"
#include "runtime/data/member_io_parts.h"
#include "runtime/process/state.h"

namespace fanstore::runtime {

using meta::ImageEntry;

namespace {

// Stored bytes [off, off + len) of the member behind `src`: a view of the node cache or of
// the blob's mapping when they are there, else read into `buf` (len bytes). nullptr with
// *err set when the read fails.
const uint8_t* StoredBytes(State& s, const MemberSource& src, const ImageEntry& e, uint64_t off,
                           size_t len, uint8_t* buf, long* err) {
  if (src.bytes) return src.bytes + off;
  if (src.pieced) {
    const long n = ReadPieces(e, src.entry, off, len, buf);
    if (n < 0) *err = n;
    return n < 0 ? nullptr : buf;
  }
  if (!src.owned)
    if (const uint8_t* v = ResidentView(s, e.partition, src.base + off, len, meta::kNoEntry))
      return v;
  const long n = PreadBlob(src.fd, buf, len, src.base + off);
  if (n < 0) {
    *err = n;
    return nullptr;
  }
  return buf;
}

}  // namespace

long LoadBlock(State& s, const MemberSource& src, const ImageEntry& e, uint64_t b, uint8_t* out) {
  auto damaged = [&](const char* why, uint64_t block) {
    return SourceStill(src) ? Damaged(s, e, why, block) : kStale;
  };
  long err = 0;
  uint8_t tail_buf[meta::kBlockTrailerBytes], entry_buf[meta::kBlockEntryBytes];
  if (e.stored_size < sizeof tail_buf)
    return damaged("damaged compressed data (block trailer)", kNoBlock);
  const uint8_t* tail =
      StoredBytes(s, src, e, e.stored_size - sizeof tail_buf, sizeof tail_buf, tail_buf, &err);
  if (!tail) return err;
  meta::BlockTrailer t;
  if (!meta::DecodeBlockTrailer(tail, e.size, e.stored_size, &t) || b >= t.count)
    return damaged("damaged compressed data (block trailer)", kNoBlock);
  const uint8_t* at = StoredBytes(s, src, e, t.table_offset + b * meta::kBlockEntryBytes,
                                  sizeof entry_buf, entry_buf, &err);
  if (!at) return err;
  meta::BlockEntry be;
  if (!meta::DecodeBlockEntry(at, t, &be)) return damaged("damaged block table entry", b);
  std::unique_ptr<uint8_t[]> copy;
  const uint8_t* stored = src.bytes ? src.bytes + be.offset : nullptr;
  if (!stored) {
    copy.reset(new (std::nothrow) uint8_t[be.length]);
    if (!copy) return -ENOMEM;
    stored = StoredBytes(s, src, e, be.offset, be.length, copy.get(), &err);
    if (!stored) return err;
  }
  const size_t n = static_cast<size_t>(meta::BlockPlainBytes(e.size, b));
  if (InflateTimed({stored, be.length}, {out, n}) != 0)
    return damaged("damaged compressed data", b);
  if (compress::Crc32c(0, out, n) != be.crc32c)
    return damaged("checksum mismatch (damaged data)", b);
  return static_cast<long>(n);
}

long ReadBlocks(State& s, uint32_t entry, uint64_t off, void* dst, size_t n) {
  const ImageEntry& e = s.ns.entry(entry);
  size_t done = 0;
  while (done < n) {
    const uint64_t pos = off + done, b = pos / meta::kDeflateBlockBytes;
    auto data = CacheFind(CacheKey(entry, b));
    if (data) {
      g_io.hits.Add(1);
    } else {
      data = NewBuffer(meta::BlockPlainBytes(e.size, b));
      if (!data) return -ENOMEM;
      long r = kStale;
      for (int i = 0; r == kStale && i < kAttempts; ++i) {
        MemberSource src;
        if (const long rc = OpenSource(entry, &src, i == kAttempts - 1); rc < 0) return rc;
        Closer closer{src};
        r = LoadBlock(s, src, e, b, data->data());
        if (!SourceStill(src)) r = kStale;
      }
      if (r < 0) return r == kStale ? -EIO : r;
      CachePut(CacheKey(entry, b), data);
    }
    const uint64_t in = pos - b * meta::kDeflateBlockBytes;
    const size_t take = static_cast<size_t>(std::min<uint64_t>(n - done, data->size() - in));
    std::memcpy(static_cast<uint8_t*>(dst) + done, data->data() + in, take);
    done += take;
  }
  return static_cast<long>(n);
}

}  // namespace fanstore::runtime
