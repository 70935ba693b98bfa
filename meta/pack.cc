#include "meta/pack.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>

#include "compress/crc32c.h"
#include "compress/deflate.h"
#include "meta/access.h"
#include "meta/blocks.h"
#include "meta/manifest.h"
#include "meta/pack_plan.h"
#include "meta/partition_writer.h"
#include "meta/scan.h"

namespace fanstore::meta {
namespace fs = std::filesystem;
namespace {

// A member's bytes as the writer will store them.
struct Encoded {
  Status status;
  Codec codec = Codec::kRaw;
  uint32_t crc = 0;
  std::vector<uint8_t> bytes;
};

// Per-thread encoder state: source root fd, deflater, scratch.
class Encoder {
 public:
  Encoder(int rootfd, const std::string& src, const CompressMode& mode)
      : rootfd_(rootfd),
        src_(src),
        mode_(mode),
        deflater_(mode.kind == CompressMode::kNone ? 0 : mode.level) {}

  // Whole-member path for members of at most kStreamThreshold bytes.
  Encoded EncodeSmall(const Member& m) {
    Encoded e;
    std::vector<uint8_t> raw;
    e.status = ReadWhole(m, raw);
    if (!e.status.ok()) return e;
    e.crc = compress::Crc32c(0, raw.data(), raw.size());
    if (WantDeflate(raw.data(), raw.size())) {
      std::vector<uint8_t> packed;
      if (deflater_.Compress(raw, packed) == 0 && Keep(packed.size(), raw.size())) {
        e.codec = Codec::kDeflate;
        e.bytes = std::move(packed);
        return e;
      }
    }
    e.bytes = std::move(raw);
    return e;
  }

  // Opens a member and checks it is still what the scan saw. Returns an fd or a failed Status.
  Result<int> OpenChecked(const Member& m) {
    const int fd = OpenRelative(rootfd_, m.path, O_RDONLY | O_NOFOLLOW);
    if (fd < 0) return Status::FromErrno(Show(m), -fd);
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        static_cast<uint64_t>(st.st_size) != m.size) {
      ::close(fd);
      return Status::Error(Show(m) + ": file changed while packing (size or type differs)");
    }
    return fd;
  }

  // Reads up to n bytes at the current offset; fails on error.
  Result<size_t> ReadSome(int fd, const Member& m, uint8_t* p, size_t n) {
    size_t got = 0;
    while (got < n) {
      const ssize_t r = ::read(fd, p + got, n - got);
      if (r < 0) {
        if (errno == EINTR) continue;
        return Status::FromErrno(Show(m), errno);
      }
      if (r == 0) break;
      got += static_cast<size_t>(r);
    }
    return got;
  }

  Status CheckAtEnd(int fd, const Member& m) {
    uint8_t extra;
    auto r = ReadSome(fd, m, &extra, 1);
    if (!r.ok()) return r.status();
    if (*r != 0) return Status::Error(Show(m) + ": file changed while packing (it grew)");
    return Status::Ok();
  }

  bool WantDeflate(const uint8_t* p, size_t n) const {
    if (mode_.kind == CompressMode::kNone || n == 0) return false;
    if (mode_.kind == CompressMode::kAuto && LooksCompressed(p, n)) return false;
    return true;
  }
  bool WantDeflateLarge(const Member& m) const {
    return mode_.kind == CompressMode::kLevel ||
           (mode_.kind == CompressMode::kAuto && LooksLikeText(m.path));
  }
  bool Keep(uint64_t packed, uint64_t raw) const {
    if (mode_.kind == CompressMode::kAuto) return packed <= raw - raw / kAutoMinSavingDivisor;
    return packed < raw;
  }

  std::string Show(const Member& m) const { return src_ + "/" + m.path; }
  compress::Deflater& deflater() { return deflater_; }

 private:
  Status ReadWhole(const Member& m, std::vector<uint8_t>& out) {
    auto fd = OpenChecked(m);
    if (!fd.ok()) return fd.status();
    out.resize(m.size);
    auto got = ReadSome(*fd, m, out.data(), out.size());
    Status s = got.ok() ? Status::Ok() : got.status();
    if (s.ok() && *got != m.size)
      s = Status::Error(Show(m) + ": file changed while packing (it shrank)");
    if (s.ok()) s = CheckAtEnd(*fd, m);
    ::close(*fd);
    return s;
  }

  int rootfd_;
  const std::string& src_;
  CompressMode mode_;
  compress::Deflater deflater_;
};

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

// Writes a large member in chunks; decides raw vs deflate as Encoder::Keep does. Deflated,
// it is cut into independent 1 MiB blocks with a table (Codec::kDeflateBlocks,
// meta/blocks.h), so that a read of part of it inflates only the blocks it touches; the
// blocks of a chunk are deflated on `threads` threads at once.
Status StreamLarge(Encoder& enc, const Member& m, PartitionWriter& w, Member& rec,
                   unsigned threads) {
  auto fd_or = enc.OpenChecked(m);
  if (!fd_or.ok()) return fd_or.status();
  const int fd = *fd_or;
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  static_assert(kStreamThreshold % kDeflateBlockBytes == 0, "chunks hold whole blocks");
  // A chunk holds at least a block per thread, so that all of them deflate at once.
  const size_t chunk_bytes = kStreamThreshold * ((threads + 7) / 8);
  std::vector<uint8_t> chunk(chunk_bytes), packed;
  std::vector<std::vector<uint8_t>> blocks;
  std::vector<std::unique_ptr<compress::Deflater>> helpers;

  // Peek at the first chunk to decide (auto: magic bytes and a trial compression of the
  // first block). A mapped compressed member is inflated whole into memory by every
  // process that maps it (np.load(mmap_mode='r'), LMDB): so auto keeps members this large
  // raw unless their name says text, which programs read; an explicit level deflates all.
  auto got = enc.ReadSome(fd, m, chunk.data(), chunk.size());
  if (!got.ok()) return got.status();
  // (a block table counts blocks in 32 bits: 4 PiB; such a member is stored raw)
  bool deflate = enc.WantDeflateLarge(m) && enc.WantDeflate(chunk.data(), *got) &&
                 BlockCount(m.size) <= UINT32_MAX;
  if (deflate) {
    enc.deflater().Compress({chunk.data(), std::min<size_t>(*got, kDeflateBlockBytes)}, packed);
    deflate = enc.Keep(packed.size(), std::min<size_t>(*got, kDeflateBlockBytes));
  }
  std::vector<uint8_t> table;
  for (int attempt = 0; attempt < 2; ++attempt) {
    const Codec codec = deflate ? Codec::kDeflateBlocks : Codec::kRaw;
    auto start = w.BeginData(codec, deflate ? 0 : m.size);
    if (!start.ok()) return start.status();
    if (::lseek(fd, 0, SEEK_SET) != 0) return Status::FromErrno(enc.Show(m), errno);
    uint32_t crc = 0;
    uint64_t total = 0;
    table.clear();
    for (;;) {
      auto n = enc.ReadSome(fd, m, chunk.data(), chunk.size());
      if (!n.ok()) return n.status();
      total += *n;
      if (total > m.size)
        return Status::Error(enc.Show(m) + ": file changed while packing (it grew)");
      crc = compress::Crc32c(crc, chunk.data(), *n);
      const bool last = *n < chunk.size() || total == m.size;
      if (deflate) {
        while (helpers.size() + 1 < threads)
          helpers.push_back(std::make_unique<compress::Deflater>(enc.deflater().level()));
        if (!DeflateBlocks(enc.deflater(), helpers, chunk.data(), *n, blocks))
          return Status::Error(enc.Show(m) + ": deflate failed");
        for (size_t b = 0; b < blocks.size(); ++b) {
          const size_t at = b * kDeflateBlockBytes;
          const BlockEntry be{w.offset() - *start, static_cast<uint32_t>(blocks[b].size()),
                              compress::Crc32c(0, chunk.data() + at,
                                               std::min<size_t>(*n - at, kDeflateBlockBytes))};
          table.resize(table.size() + kBlockEntryBytes);
          EncodeBlockEntry(be, table.data() + table.size() - kBlockEntryBytes);
          FANSTORE_RETURN_IF_ERROR(w.Write(blocks[b]));
        }
      } else {
        FANSTORE_RETURN_IF_ERROR(w.Write({chunk.data(), *n}));
      }
      if (last) break;
    }
    if (total != m.size)
      return Status::Error(enc.Show(m) + ": file changed while packing (it shrank)");
    FANSTORE_RETURN_IF_ERROR(enc.CheckAtEnd(fd, m));
    if (deflate) {
      const size_t entries = table.size();
      table.resize(entries + kBlockTrailerBytes);
      EncodeBlockTrailer(static_cast<uint32_t>(entries / kBlockEntryBytes), table.data() + entries);
      FANSTORE_RETURN_IF_ERROR(w.Write(table));
    }
    const uint64_t stored = w.offset() - *start;
    if (deflate && !enc.Keep(stored, m.size)) {  // the rest did not compress: store raw
      FANSTORE_RETURN_IF_ERROR(w.Rewind(*start));
      deflate = false;
      continue;
    }
    rec.data_offset = *start;
    rec.stored_size = stored;
    rec.codec = codec;
    rec.crc32c = crc;
    return Status::Ok();
  }
  return Status::Error(enc.Show(m) + ": internal error while streaming");
}

// Ordered hand-off from the workers to the writer: slot k % window holds job k.
class Pipeline {
 public:
  Pipeline(size_t jobs, size_t window) : jobs_(jobs), window_(window), slots_(window) {}

  // Worker side: next job index, or -1 when done/aborted. Blocks while too far ahead.
  int64_t Claim() {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return abort_ || next_ >= jobs_ || next_ < consumed_ + window_; });
    if (abort_ || next_ >= jobs_) return -1;
    return static_cast<int64_t>(next_++);
  }
  void Deliver(size_t job, Encoded e) {
    std::lock_guard lk(mu_);
    slots_[job % window_].e = std::move(e);
    slots_[job % window_].ready = true;
    cv_.notify_all();
  }
  // Writer side: waits for job k and takes it.
  Encoded Take(size_t job) {
    std::unique_lock lk(mu_);
    Slot& s = slots_[job % window_];
    cv_.wait(lk, [&] { return s.ready; });
    s.ready = false;
    consumed_ = job + 1;
    cv_.notify_all();
    return std::move(s.e);
  }
  void Abort() {
    std::lock_guard lk(mu_);
    abort_ = true;
    cv_.notify_all();
  }

 private:
  struct Slot {
    bool ready = false;
    Encoded e;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  size_t jobs_, window_, next_ = 0, consumed_ = 0;
  bool abort_ = false;
  std::vector<Slot> slots_;
};

bool NeedsWorker(const Member& m) {
  return m.kind == Kind::kFile && m.size > 0 && m.size <= kStreamThreshold;
}

Status PrepareOutput(const PackOptions& o, std::string* src_abs, std::string* out_abs) {
  std::error_code ec;
  struct stat st;
  if (::stat(o.src.c_str(), &st) != 0) return Status::FromErrno(o.src, errno);
  if (!S_ISDIR(st.st_mode)) return Status::Error(o.src + ": not a directory");
  *src_abs = fs::canonical(o.src, ec).string();
  if (ec) return Status::Error(o.src + ": " + ec.message());
  const fs::path out = fs::absolute(o.out, ec).lexically_normal();
  if (ec) return Status::Error(o.out + ": " + ec.message());
  fs::path parent = fs::weakly_canonical(out.parent_path(), ec);
  *out_abs = (parent / out.filename()).string();
  const std::string s = *src_abs + "/";
  if ((*out_abs + "/").rfind(s, 0) == 0)
    return Status::Error(o.out + ": output is inside the source tree " + *src_abs);
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

Result<CompressMode> CompressMode::Parse(const std::string& s) {
  if (s == "none") return CompressMode{kNone, 0};
  if (s == "auto") return CompressMode{kAuto, kAutoLevel};
  if (s.size() == 1 && s[0] >= '0' && s[0] <= '3') return CompressMode{kLevel, s[0] - '0'};
  return Status::Error("--compress: expected none, auto or a level 0..3, got '" + s + "'");
}

std::string CompressMode::ToString() const {
  switch (kind) {
    case kNone:
      return "none";
    case kAuto:
      return "auto";
    default:
      return std::to_string(level);
  }
}

bool LooksLikeText(std::string_view path) {
  const size_t dot = path.rfind('.');
  if (dot == std::string_view::npos || path.find('/', dot) != std::string_view::npos) return false;
  std::string ext(path.substr(dot + 1));
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* t :
       {"txt", "csv", "tsv", "json", "jsonl", "ndjson", "xml", "html", "log", "yaml", "yml", "md"})
    if (ext == t) return true;
  return false;
}

bool LooksCompressed(const uint8_t* p, size_t n) {
  auto starts = [&](std::initializer_list<uint8_t> sig, size_t at = 0) {
    if (n < at + sig.size()) return false;
    return std::memcmp(p + at, std::data(sig), sig.size()) == 0;
  };
  return starts({0xFF, 0xD8, 0xFF}) ||                                       // JPEG
         starts({0x89, 'P', 'N', 'G'}) ||                                    // PNG
         starts({'G', 'I', 'F', '8'}) ||                                     // GIF
         starts({0x1F, 0x8B}) ||                                             // gzip
         starts({'P', 'K', 0x03, 0x04}) ||                                   // zip, npz, docx
         starts({0xFD, '7', 'z', 'X', 'Z'}) ||                               // xz
         starts({0x28, 0xB5, 0x2F, 0xFD}) ||                                 // zstd
         starts({'B', 'Z', 'h'}) ||                                          // bzip2
         starts({'f', 't', 'y', 'p'}, 4) ||                                  // MP4 / MOV / HEIC
         (starts({'R', 'I', 'F', 'F'}) && starts({'W', 'E', 'B', 'P'}, 8));  // WebP
}

Result<PackStats> Pack(const PackOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  std::string src, out;
  FANSTORE_RETURN_IF_ERROR(PrepareOutput(o, &src, &out));
  auto warn = o.warn ? o.warn : [](const std::string&) {};
  auto scanned = ScanTree(src, warn);
  if (!scanned.ok()) return scanned.status();
  std::vector<Member>& members = scanned->members;

  PackStats stats;
  stats.skipped = scanned->skipped;
  PackProgress prog;
  for (const Member& m : members) {
    if (m.kind == Kind::kFile) {
      ++stats.files;
      prog.bytes_total += m.size;
    } else if (m.kind == Kind::kDir) {
      ++stats.dirs;
    } else {
      ++stats.symlinks;
    }
  }
  prog.files_total = stats.files;
  for (const Member& m : members) {
    const unsigned need = m.kind == Kind::kDir ? kMayRead | kMayExec : kMayRead;
    if (m.kind != Kind::kSymlink && !OpenToAll(m.mode, need)) {
      stats.restricted_member = m.path.empty() ? "." : m.path;
      stats.restricted_mode = m.mode;
      break;
    }
  }
  stats.private_output = !stats.restricted_member.empty() && !o.public_output;
  if (o.on_scanned) o.on_scanned(prog);
  // As many partitions as asked (or the default), but never one without a non-empty file
  // (a few large files cut by bytes can leave some with none): fewer, until each has one.
  uint32_t nparts = o.partitions ? o.partitions : DefaultPartitions(prog.bytes_total);
  std::vector<PartitionPlan> plans;
  for (;;) {
    plans = PlanPartitions(members, nparts, o.broadcast);
    uint32_t filled = 0;
    for (uint32_t p = 0; p < nparts; ++p) {
      bool has = false;
      for (size_t i : plans[p].members)
        has = has ||
              (members[i].kind != Kind::kDir && (members[i].size > 0 || prog.bytes_total == 0));
      filled += has;
    }
    if (filled == nparts || nparts == 1) break;
    nparts = std::max(1u, filled);
  }
  stats.partitions_asked = o.partitions;
  const uint32_t total_parts = static_cast<uint32_t>(plans.size());
  std::string salt = "parts=" + std::to_string(nparts) + ";compress=" + o.compress.ToString();
  for (const std::string& g : o.broadcast) salt += ";bcast=" + g;
  const uint64_t dataset_id = DatasetId(members, salt);

  // Jobs for the workers, in write order.
  std::vector<size_t> jobs;
  for (const PartitionPlan& p : plans)
    for (size_t i : p.members)
      if (NeedsWorker(members[i])) jobs.push_back(i);

  const int rootfd = ::open(src.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (rootfd < 0) return Status::FromErrno(src, errno);
  const std::string tmp = out + ".fanstore-partial-" + std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  if (::mkdir(tmp.c_str(), stats.private_output ? 0700 : 0755) != 0) {
    const int e = errno;
    ::close(rootfd);
    return Status::FromErrno(tmp, e);
  }

  const unsigned threads =
      o.threads ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  Pipeline pipe(jobs.size(), 4 * static_cast<size_t>(threads));
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      Encoder enc(rootfd, src, o.compress);
      for (int64_t j; (j = pipe.Claim()) >= 0;) pipe.Deliver(j, enc.EncodeSmall(members[jobs[j]]));
    });
  }

  Manifest manifest;
  manifest.dataset_id = dataset_id;
  manifest.source = src;
  manifest.compress = o.compress.ToString();
  manifest.files = stats.files;
  manifest.dirs = stats.dirs;
  manifest.symlinks = stats.symlinks;
  Status st;
  {
    Encoder enc(rootfd, src, o.compress);
    size_t next_job = 0;
    for (uint32_t p = 0; p < total_parts && st.ok(); ++p) {
      PartitionWriter w;
      st = w.Open(tmp + "/" + PartitionFileName(p), p, total_parts, plans[p].flags, dataset_id);
      for (size_t idx = 0; idx < plans[p].members.size() && st.ok(); ++idx) {
        Member rec = members[plans[p].members[idx]];
        if (NeedsWorker(rec)) {
          Encoded e = pipe.Take(next_job++);
          st = e.status;
          if (!st.ok()) break;
          auto off = w.BeginData(e.codec, e.bytes.size());
          if (!off.ok()) {
            st = off.status();
            break;
          }
          rec.data_offset = *off;
          rec.stored_size = e.bytes.size();
          rec.codec = e.codec;
          rec.crc32c = e.crc;
          st = w.Write(e.bytes);
        } else if (rec.kind == Kind::kFile && rec.size > 0) {
          st = StreamLarge(enc, members[plans[p].members[idx]], w, rec, threads);
        }
        if (st.ok()) st = w.Add(rec);
        if (st.ok() && rec.kind == Kind::kFile) {
          ++prog.files_done;
          prog.bytes_done += rec.size;
          if (rec.codec != Codec::kRaw) ++stats.compressed_members;
          if (o.progress) o.progress(prog);
        }
      }
      if (!st.ok()) break;
      auto sum = w.Finish();
      if (!sum.ok()) {
        st = sum.status();
        break;
      }
      manifest.bytes += sum->bytes;
      manifest.stored += sum->stored;
      stats.output_bytes += sum->file_size;
      manifest.partitions.push_back(*sum);
    }
  }
  pipe.Abort();
  for (std::thread& t : workers) t.join();
  ::close(rootfd);

  if (st.ok()) st = WriteFileAtomically(tmp + "/" + kManifestName, manifest.Encode());
  if (st.ok() && stats.private_output) st = MakeOwnerOnly(tmp);
  if (st.ok()) {
    const std::string old = out + ".fanstore-old-" + std::to_string(::getpid());
    const bool replace = fs::exists(out, ec);
    if (replace && ::rename(out.c_str(), old.c_str()) != 0) st = Status::FromErrno(out, errno);
    if (st.ok() && ::rename(tmp.c_str(), out.c_str()) != 0) {
      st = Status::FromErrno(out, errno);
      if (replace) ::rename(old.c_str(), out.c_str());
    }
    if (st.ok() && replace) fs::remove_all(old, ec);
  }
  if (!st.ok()) {
    fs::remove_all(tmp, ec);
    return st;
  }
  stats.bytes_in = manifest.bytes;
  stats.bytes_stored = manifest.stored;
  stats.output_bytes += manifest.Encode().size();
  stats.partitions = total_parts;
  stats.sharded = nparts;
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return stats;
}

}  // namespace fanstore::meta
