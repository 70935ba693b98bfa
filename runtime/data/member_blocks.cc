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
#include "runtime/data/member_source.h"
#include "runtime/process/state.h"

namespace fanstore::runtime {

using meta::ImageEntry;

long LoadBlock(State& s, const MemberSource& src, const ImageEntry& e, uint64_t b, uint8_t* out) {
  auto damaged = [&](const char* why, uint64_t block) {
    return src.Still() ? Damaged(s, e, why, block) : kStale;
  };
  long err = 0;
  uint8_t tail_buf[meta::kBlockTrailerBytes], entry_buf[meta::kBlockEntryBytes];
  if (e.stored_size < sizeof tail_buf)
    return damaged("damaged compressed data (block trailer)", kNoBlock);
  const uint8_t* tail = src.ViewOrRead(e.stored_size - sizeof tail_buf, sizeof tail_buf, tail_buf,
                                       ViewRule::kAny, &err);
  if (!tail) return err;
  meta::BlockTrailer t;
  if (!meta::DecodeBlockTrailer(tail, e.size, e.stored_size, &t) || b >= t.count)
    return damaged("damaged compressed data (block trailer)", kNoBlock);
  const uint8_t* at = src.ViewOrRead(t.table_offset + b * meta::kBlockEntryBytes, sizeof entry_buf,
                                     entry_buf, ViewRule::kAny, &err);
  if (!at) return err;
  meta::BlockEntry be;
  if (!meta::DecodeBlockEntry(at, t, &be)) return damaged("damaged block table entry", b);
  std::unique_ptr<uint8_t[]> copy;
  const uint8_t* stored = src.View(be.offset, be.length, ViewRule::kAny);
  if (!stored) {
    copy.reset(new (std::nothrow) uint8_t[be.length]);
    if (!copy) return -ENOMEM;
    if (const long r = src.Read(be.offset, be.length, copy.get()); r < 0) return r;
    stored = copy.get();
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
      const long r = WithSource(entry, [&](const MemberSource& src) {
        const long got = LoadBlock(s, src, e, b, data->data());
        return src.Still() ? got : kStale;
      });
      if (r < 0) return r;
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
