#include "runtime/data/member_io.h"

#include <sys/syscall.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <new>
#include <span>

#include "base/raw_syscall.h"
#include "compress/crc32c.h"
#include "compress/inflate.h"
#include "intercept/preload_log.h"
#include "io/pieces.h"
#include "meta/blocks.h"
#include "meta/format.h"
#include "runtime/data/member_io_parts.h"
#include "runtime/data/member_source.h"
#include "runtime/data/remote.h"
#include "runtime/data/verified.h"
#include "runtime/process/state.h"

namespace fanstore::runtime {

IoCounters g_io;

namespace {

using meta::Codec;
using meta::ImageEntry;

constexpr uint64_t kCacheMax = 8ull << 20;  // members up to this size may be cached whole
// A partial read of a raw member at least this long, or one that reaches the member's end,
// is read straight from the blob into the caller's buffer (ReadRange): loading the whole
// member into the cache pays only for a reader that takes it in small pieces (PIL through
// an 8 KiB BufferedReader), and a fresh buffer of a few hundred KiB costs as many page
// faults as the read (fsbench's 256 KiB reads of larger members: 2,800 faults per 11,000
// files).
constexpr size_t kDirectRead = 64u << 10;

}  // namespace

long Damaged(const State& s, const ImageEntry& e, const char* why, uint64_t block) {
  g_io.errors.Add(1);
  const std::string where = s.ShownPartition(e.partition);
  const char* from = where.empty() ? "fetched from another node" : where.c_str();
  if (block == kNoBlock)
    intercept::Logger().error("{}: member '{}': {}", from, s.ns.path(e), why);
  else
    intercept::Logger().error("{}: member '{}': {} in block {}", from, s.ns.path(e), why, block);
  return -EIO;
}

long InflateTimed(std::span<const uint8_t> in, std::span<uint8_t> out) {
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = compress::InflateExact(in, out);
  g_io.inflates.Add(1);
  g_io.inflate_ns.Add(static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count()));
  return rc;
}

namespace {

// The whole (uncompressed, verified) bytes of a member from `src` into `out`; kStale when
// arena bytes were evicted while in use.
long LoadFrom(State& s, const MemberSource& src, uint32_t entry, uint8_t* out) {
  const ImageEntry& e = s.ns.entry(entry);
  if (e.codec == static_cast<uint8_t>(Codec::kDeflateBlocks)) {
    for (uint64_t b = 0; b < meta::BlockCount(e.size); ++b)
      if (const long rc = LoadBlock(s, src, e, b, out + b * meta::kDeflateBlockBytes); rc < 0)
        return rc;
    if (!src.Still()) return kStale;
    if (compress::Crc32c(0, out, e.size) != e.crc32c)
      return Damaged(s, e, "checksum mismatch (damaged data)");
    return static_cast<long>(e.size);
  }
  const uint8_t* view = src.View(0, e.stored_size, ViewRule::kWhole);
  if (meta::StoredRaw(e.codec)) {
    long n = static_cast<long>(e.size);
    if (view)
      CopyOut(out, view, e.size);
    else
      n = src.Read(0, e.size, out);
    if (n < 0) return n;
    if (!src.Still()) return kStale;
    if (!s.trust_raw && (s.verify_every_read || !IsVerified(entry))) {
      g_io.raw_checks.Add(1);
      if (compress::Crc32c(0, out, e.size) != e.crc32c)
        return Damaged(s, e, "checksum mismatch (damaged data)");
      MarkVerified(entry);
    }
    return n;
  }
  // Compressed: inflated straight from the view when there is one, else from a read copy.
  std::unique_ptr<uint8_t[]> stored;
  if (!view) {
    stored.reset(new (std::nothrow) uint8_t[e.stored_size]);
    if (!stored) return -ENOMEM;
    if (const long n = src.Read(0, e.stored_size, stored.get()); n < 0) return n;
    view = stored.get();
  }
  const long rc = InflateTimed({view, e.stored_size}, {out, e.size});
  if (!src.Still()) return kStale;
  if (rc != 0) return Damaged(s, e, "damaged compressed data");
  if (compress::Crc32c(0, out, e.size) != e.crc32c)
    return Damaged(s, e, "checksum mismatch (damaged data)");
  return static_cast<long>(e.size);
}

long LoadWhole(State& s, uint32_t entry, uint8_t* out) {
  return WithSource(entry, [&](const MemberSource& src) { return LoadFrom(s, src, entry, out); });
}

}  // namespace

long ReadStored(uint32_t entry, uint64_t off, void* dst, size_t n) {
  auto* to = static_cast<uint8_t*>(dst);
  return WithSource(entry, [&](const MemberSource& src) {
    if (const uint8_t* view = src.View(off, n, ViewRule::kRange)) {
      CopyOut(to, view, n);
      return src.Still() ? static_cast<long>(n) : kStale;
    }
    return src.Read(off, n, to);
  });
}

bool FetchedByPiece(uint32_t entry) {
  State& s = *Get();
  return s.parts[s.ns.entry(entry).partition].empty() && Remote().pieced(entry);
}

ssize_t ReadMember(uint32_t entry, uint64_t off, void* dst, size_t len) {
  State& s = *Get();
  const ImageEntry& e = s.ns.entry(entry);
  if (off >= e.size || len == 0) return 0;
  const size_t n = static_cast<size_t>(std::min<uint64_t>(len, e.size - off));
  g_io.reads.Add(1);
  const bool raw = meta::StoredRaw(e.codec);
  // The whole member in one read: straight into the caller's buffer.
  if (off == 0 && n == e.size) {
    const long r = LoadWhole(s, entry, static_cast<uint8_t*>(dst));
    if (r > 0) g_io.bytes.Add(static_cast<uint64_t>(r));
    return r;
  }
  // A raw member not checked yet on this node (or under FANSTORE_VERIFY=all, up to 8 MiB)
  // is loaded whole, which checks it; a larger one is read once to check it first.
  const bool checked = !raw || s.trust_raw || (IsVerified(entry) && !s.verify_every_read);
  if (!checked && e.codec == static_cast<uint8_t>(Codec::kRawBlocks)) {  // the blocks it touches
    const long r = ReadRawBlocks(s, entry, off, static_cast<uint8_t*>(dst), n);
    if (r > 0) g_io.bytes.Add(static_cast<uint64_t>(r));
    return r;
  }
  if (raw && !checked && e.size > kCacheMax)
    if (const long rc = CheckRawMember(entry, 0, e.size); rc < 0) return rc;
  const bool direct = n >= kDirectRead || off + n == e.size;  // long, or the member's tail
  if ((raw && (e.size > kCacheMax || (direct && checked))) ||
      e.codec == static_cast<uint8_t>(Codec::kDeflateBlocks)) {
    // a raw member's long range, or a large one's: read directly; a block-deflated
    // member: its blocks
    const long r = raw ? ReadStored(entry, off, dst, n) : ReadBlocks(s, entry, off, dst, n);
    if (r > 0) g_io.bytes.Add(static_cast<uint64_t>(r));
    return r;
  }
  auto data = CacheFind(CacheKey(entry, kWholeMember));
  if (data) {
    g_io.hits.Add(1);
  } else {
    data = NewBuffer(e.size);
    if (!data) return -ENOMEM;
    const long r = LoadWhole(s, entry, data->data());
    if (r < 0) return r;
    CachePut(CacheKey(entry, kWholeMember), data);
  }
  std::memcpy(dst, data->data() + off, n);
  g_io.bytes.Add(n);
  return static_cast<ssize_t>(n);
}

long CheckRawMember(uint32_t entry, uint64_t off, uint64_t len) {
  State& s = *Get();
  const ImageEntry& e = s.ns.entry(entry);
  if (!meta::StoredRaw(e.codec) || s.trust_raw || IsVerified(entry)) return 0;
  if (e.codec == static_cast<uint8_t>(Codec::kRawBlocks)) return CheckRawBlocks(s, entry, off, len);
  // (in slices, so that a member of gigabytes needs no buffer of its size)
  constexpr size_t kSlice = 8u << 20;
  auto buf = NewBuffer(std::min<uint64_t>(e.size, kSlice));
  if (!buf) return -ENOMEM;
  g_io.raw_checks.Add(1);
  uint32_t crc = 0;
  for (uint64_t off = 0; off < e.size;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(e.size - off, kSlice));
    const long r = ReadStored(entry, off, buf->data(), n);
    if (r < 0) return r;
    if (static_cast<size_t>(r) != n) return Damaged(s, e, "member shorter than packed");
    crc = compress::Crc32c(crc, buf->data(), n);
    off += n;
  }
  if (crc != e.crc32c) return Damaged(s, e, "checksum mismatch (damaged data)");
  MarkVerified(entry);
  return 0;
}

void MemberIoAfterFork() {
  ForgetReadsAfterFork();
}

IoStats SnapshotIoStats() {
  IoStats st{g_io.reads.Load(),      g_io.bytes.Load(), g_io.inflates.Load(),
             g_io.inflate_ns.Load(), g_io.hits.Load(),  g_io.errors.Load()};
  st.remote = g_io.remote.Load();
  st.device_reads = g_io.device.Load();
  st.mapped_reads = g_io.mapped.Load();
  st.trusted_reads = g_io.trusted.Load();
  st.node_cache_hits = g_io.arena.Load();
  st.raw_checks = g_io.raw_checks.Load();
  st.landed_reads = g_io.landed.Load();
  st.landing_waits = g_io.landing_waits.Load();
  st.landing_gave_up = g_io.landing_gave_up.Load();
  st.realigned = g_io.realigned.Load();
  return st;
}

}  // namespace fanstore::runtime
