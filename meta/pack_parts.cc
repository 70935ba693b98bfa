#include "meta/pack_parts.h"

#include <fcntl.h>
#include <stdio.h>  // renameat2
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <thread>

#include "compress/crc32c.h"
#include "meta/access.h"
#include "meta/blocks.h"
#include "meta/endian.h"

namespace fanstore::meta::pack_parts {
namespace fs = std::filesystem;
namespace {

// Deflates the blocks of one chunk on up to `helpers.size() + 1` threads (the caller's
// and helpers', each with its own deflater): blocks are independent streams, so the bytes
// are the same whatever the thread count. Returns false if a block failed.
bool DeflateBlocks(compress::Deflater& own,
                   std::vector<std::unique_ptr<compress::Deflater>>& helpers, const uint8_t* data,
                   size_t n, std::vector<std::vector<uint8_t>>& out) {
  const size_t blocks = (n + kDeflateBlockBytes - 1) / kDeflateBlockBytes;
  out.resize(blocks);
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  auto run = [&](compress::Deflater& d) {
    for (size_t b; (b = next.fetch_add(1)) < blocks;) {
      const size_t at = b * kDeflateBlockBytes;
      if (d.Compress({data + at, std::min<size_t>(n - at, kDeflateBlockBytes)}, out[b]) != 0)
        failed = true;
    }
  };
  std::vector<std::thread> threads;
  for (size_t t = 0; t < helpers.size() && t + 1 < blocks; ++t)
    threads.emplace_back([&, t] { run(*helpers[t]); });
  run(own);
  for (std::thread& t : threads) t.join();
  return !failed;
}

// The files of a directory made 0700: readable by their owner only (0600), like it.
Status MakeOwnerOnly(const std::string& dir) {
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(dir, ec))
    if (::chmod(f.path().c_str(), 0600) != 0) return Status::FromErrno(f.path().string(), errno);
  if (ec) return Status::Error(dir + ": " + ec.message());
  return Status::Ok();
}

Status WriteFileAtomically(const std::string& path, const std::string& data) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::FromErrno(tmp, errno);
  const ssize_t w = ::write(fd, data.data(), data.size());
  const int e = errno;
  const bool ok = w == static_cast<ssize_t>(data.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) return Status::FromErrno(tmp, w < 0 ? e : ENOSPC);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return Status::FromErrno(path, errno);
  return Status::Ok();
}

}  // namespace

bool Policy::WantDeflate(const uint8_t* p, size_t n) const {
  if (mode_.kind == CompressMode::kNone || n == 0) return false;
  if (mode_.kind == CompressMode::kAuto && LooksCompressed(p, n)) return false;
  return true;
}

bool Policy::WantDeflateLarge(std::string_view path) const {
  return mode_.kind == CompressMode::kLevel ||
         (mode_.kind == CompressMode::kAuto && LooksLikeText(path));
}

bool Policy::Keep(uint64_t packed, uint64_t raw) const {
  if (mode_.kind == CompressMode::kAuto) return packed <= raw - raw / kAutoMinSavingDivisor;
  return packed < raw;
}

Encoded EncodeBytes(std::vector<uint8_t> raw, const Policy& policy, compress::Deflater& d) {
  Encoded e;
  e.crc = compress::Crc32c(0, raw.data(), raw.size());
  if (policy.WantDeflate(raw.data(), raw.size())) {
    std::vector<uint8_t> packed;
    if (d.Compress(raw, packed) == 0 && policy.Keep(packed.size(), raw.size())) {
      e.codec = Codec::kDeflate;
      e.bytes = std::move(packed);
      return e;
    }
  }
  e.bytes = std::move(raw);
  return e;
}

// Deflated, a large member is cut into independent 1 MiB blocks with a table
// (meta/blocks.h), so that a read of part of it inflates only the blocks it touches. If
// the whole did not compress enough it is written again raw when the input can go back;
// an archive's member cannot, and then keeps its blocks (its bytes are intact either way).
Status StreamLarge(LargeInput& in, const Member& m, const Policy& policy, compress::Deflater& own,
                   PartitionWriter& w, Member& rec, unsigned threads) {
  static_assert(kStreamThreshold % kDeflateBlockBytes == 0, "chunks hold whole blocks");
  // A chunk holds at least a block per thread, so that all of them deflate at once.
  const size_t chunk_bytes = kStreamThreshold * ((threads + 7) / 8);
  // (a declared size beyond the room left is refused before a byte is written: a sparse
  // file or an archive member that says petabytes must not fill the disk first)
  if (const uint64_t room = w.FreeBytes(); m.size > room)
    return Status::Error(in.Show() + ": " + std::to_string(m.size) + " bytes, more than the " +
                         std::to_string(room) + " bytes free where OUT is written");
  std::vector<uint8_t> chunk(chunk_bytes), packed;
  std::vector<std::vector<uint8_t>> blocks;
  std::vector<std::unique_ptr<compress::Deflater>> helpers;

  // Decide from the first chunk (auto: magic bytes and a trial compression of the first
  // block). A mapped compressed member is inflated whole into memory by every process
  // that maps it (np.load(mmap_mode='r'), LMDB): so auto keeps members this large raw
  // unless their name says text, which programs read; an explicit level deflates all.
  auto got = in.Read(chunk.data(), chunk.size());
  if (!got.ok()) return got.status();
  size_t have = *got;  // bytes of the first chunk already in `chunk`
  // (a block table counts blocks in 32 bits: 4 PiB; such a member is stored raw)
  if (BlockCount(m.size) > UINT32_MAX)
    return Status::Error(in.Show() + ": " + std::to_string(m.size) +
                         " bytes, more than a member can hold (4 PiB)");
  bool deflate = policy.WantDeflateLarge(m.path) && policy.WantDeflate(chunk.data(), *got);
  if (deflate) {
    own.Compress({chunk.data(), std::min<size_t>(*got, kDeflateBlockBytes)}, packed);
    deflate = policy.Keep(packed.size(), std::min<size_t>(*got, kDeflateBlockBytes));
  }
  std::vector<uint8_t> table;
  for (int attempt = 0; attempt < 2; ++attempt) {
    // (raw: the bytes, then a checksum per block, so that a reader checks what it reads)
    const Codec codec = deflate ? Codec::kDeflateBlocks : Codec::kRawBlocks;
    auto start = w.BeginData(codec, deflate ? 0 : m.size);
    if (!start.ok()) return start.status();
    uint32_t crc = 0;
    uint64_t total = 0;
    table.clear();
    for (;;) {
      size_t n = have;
      if (have == SIZE_MAX) {
        auto r = in.Read(chunk.data(), chunk.size());
        if (!r.ok()) return r.status();
        n = *r;
      }
      have = SIZE_MAX;
      total += n;
      if (total > m.size)
        return Status::Error(in.Show() + ": file changed while packing (it grew)");
      crc = compress::Crc32c(crc, chunk.data(), n);
      const bool last = n < chunk.size() || total == m.size;
      if (deflate) {
        while (helpers.size() + 1 < threads)
          helpers.push_back(std::make_unique<compress::Deflater>(own.level()));
        if (!DeflateBlocks(own, helpers, chunk.data(), n, blocks))
          return Status::Error(in.Show() + ": deflate failed");
        for (size_t b = 0; b < blocks.size(); ++b) {
          const size_t at = b * kDeflateBlockBytes;
          const BlockEntry be{
              w.offset() - *start, static_cast<uint32_t>(blocks[b].size()),
              compress::Crc32c(0, chunk.data() + at, std::min<size_t>(n - at, kDeflateBlockBytes))};
          table.resize(table.size() + kBlockEntryBytes);
          EncodeBlockEntry(be, table.data() + table.size() - kBlockEntryBytes);
          FANSTORE_RETURN_IF_ERROR(w.Write(blocks[b]));
        }
      } else {
        for (size_t at = 0; at < n; at += kDeflateBlockBytes) {
          table.resize(table.size() + kRawBlockCrcBytes);
          PutU32(
              table.data() + table.size() - kRawBlockCrcBytes,
              compress::Crc32c(0, chunk.data() + at, std::min<size_t>(n - at, kDeflateBlockBytes)));
        }
        FANSTORE_RETURN_IF_ERROR(w.Write({chunk.data(), n}));
      }
      if (last) break;
    }
    if (total != m.size)
      return Status::Error(in.Show() + ": file changed while packing (it shrank)");
    FANSTORE_RETURN_IF_ERROR(in.CheckAtEnd());
    const size_t entries = table.size();
    table.resize(entries + kBlockTrailerBytes);
    EncodeBlockTrailer(static_cast<uint32_t>(BlockCount(m.size)), table.data() + entries);
    FANSTORE_RETURN_IF_ERROR(w.Write(table));
    const uint64_t stored = w.offset() - *start;
    if (deflate && !policy.Keep(stored, m.size) && attempt == 0) {
      auto back = in.Rewind();
      if (!back.ok()) return back.status();
      if (*back) {  // the rest did not compress: store raw
        FANSTORE_RETURN_IF_ERROR(w.Rewind(*start));
        deflate = false;
        continue;
      }
    }
    rec.data_offset = *start;
    rec.stored_size = stored;
    rec.codec = codec;
    rec.crc32c = crc;
    return Status::Ok();
  }
  return Status::Error(in.Show() + ": internal error while streaming");
}

void FindRestricted(const std::vector<Member>& members, PackStats* stats) {
  for (const Member& m : members) {
    const unsigned need = m.kind == Kind::kDir ? kMayRead | kMayExec : kMayRead;
    if (m.kind != Kind::kSymlink && !OpenToAll(m.mode, need)) {
      stats->restricted_member = m.path.empty() ? "." : m.path;
      stats->restricted_mode = m.mode;
      return;
    }
  }
}

Status CheckOutput(const PackOptions& o, const std::vector<std::string>& sources,
                   std::string* out_abs) {
  std::error_code ec;
  const fs::path out = fs::absolute(o.out, ec).lexically_normal();
  if (ec) return Status::Error(o.out + ": " + ec.message());
  fs::path parent = fs::weakly_canonical(out.parent_path(), ec);
  *out_abs = (parent / out.filename()).string();
  for (const std::string& src : sources) {
    if ((*out_abs + "/").rfind(src + "/", 0) == 0)
      return Status::Error(o.out + ": output is inside the source tree " + src);
    if (*out_abs == src) return Status::Error(o.out + ": output is the source " + src);
  }
  struct stat st;
  if (::lstat(out_abs->c_str(), &st) == 0) {
    if (!o.force) return Status::Error(o.out + ": already exists (use --force to replace it)");
    const bool empty_dir = S_ISDIR(st.st_mode) && fs::is_empty(*out_abs, ec);
    const bool dataset = S_ISDIR(st.st_mode) && fs::exists(*out_abs + "/" + kManifestName, ec);
    if (!empty_dir && !dataset)
      return Status::Error(o.out +
                           ": exists and is not a FanStore dataset; refusing to replace it");
  } else if (errno != ENOENT) {
    return Status::FromErrno(o.out, errno);
  }
  return Status::Ok();
}

Status Publish(const std::string& tmp, const std::string& out, const Manifest& manifest,
               bool private_output) {
  std::error_code ec;
  Status st = WriteFileAtomically(tmp + "/" + kManifestName, manifest.Encode());
  if (st.ok() && private_output) st = MakeOwnerOnly(tmp);
  // A dataset being replaced is swapped out whole, in one step where the file system can
  // (RENAME_EXCHANGE), and its files are unlinked, never rewritten: a job still running on
  // it keeps reading the old blobs through the descriptors fanrun holds, and a job that
  // starts now finds either dataset whole.
  const bool replace = st.ok() && fs::exists(out, ec);
  if (replace && ::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, out.c_str(), RENAME_EXCHANGE) == 0) {
    fs::remove_all(tmp, ec);  // (the old dataset, now at tmp's name)
    return Status::Ok();
  }
  if (st.ok()) {  // (no exchange on this file system: out moves aside, then tmp takes its name)
    const std::string old = out + ".fanstore-old-" + std::to_string(::getpid());
    if (replace && ::rename(out.c_str(), old.c_str()) != 0) st = Status::FromErrno(out, errno);
    if (st.ok() && ::rename(tmp.c_str(), out.c_str()) != 0) {
      st = Status::FromErrno(out, errno);
      if (replace) ::rename(old.c_str(), out.c_str());
    }
    if (st.ok() && replace) fs::remove_all(old, ec);
  }
  if (!st.ok()) fs::remove_all(tmp, ec);
  return st;
}

}  // namespace fanstore::meta::pack_parts
