#include "meta/pack.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>

#include "meta/manifest.h"
#include "meta/pack_parts.h"
#include "meta/pack_plan.h"
#include "meta/partition_writer.h"
#include "meta/scan.h"

namespace fanstore::meta {
namespace fs = std::filesystem;
namespace {

using pack_parts::Encoded;
using pack_parts::Policy;

// Per-thread encoder state: source root fd, deflater.
class Encoder {
 public:
  Encoder(int rootfd, const std::string& src, const CompressMode& mode)
      : rootfd_(rootfd), src_(src), policy_(mode), deflater_(policy_.level()) {}

  // Whole-member path for members of at most kStreamThreshold bytes.
  Encoded EncodeSmall(const Member& m) {
    std::vector<uint8_t> raw;
    Status s = ReadWhole(m, raw);
    if (!s.ok()) return Encoded{s};
    return pack_parts::EncodeBytes(std::move(raw), policy_, deflater_);
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

  std::string Show(const Member& m) const { return src_ + "/" + m.path; }
  const Policy& policy() const { return policy_; }
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
  Policy policy_;
  compress::Deflater deflater_;
};

// A large member of the source tree, read through an open fd that can seek back.
class FileInput final : public pack_parts::LargeInput {
 public:
  FileInput(Encoder& enc, const Member& m, int fd) : enc_(enc), m_(m), fd_(fd) {}
  ~FileInput() override { ::close(fd_); }
  Result<size_t> Read(uint8_t* p, size_t n) override { return enc_.ReadSome(fd_, m_, p, n); }
  Result<bool> Rewind() override {
    if (::lseek(fd_, 0, SEEK_SET) != 0) return Status::FromErrno(Show(), errno);
    return true;
  }
  Status CheckAtEnd() override { return enc_.CheckAtEnd(fd_, m_); }
  std::string Show() const override { return enc_.Show(m_); }

 private:
  Encoder& enc_;
  const Member& m_;
  int fd_;
};

Status StreamLarge(Encoder& enc, const Member& m, PartitionWriter& w, Member& rec,
                   unsigned threads) {
  auto fd = enc.OpenChecked(m);
  if (!fd.ok()) return fd.status();
  FileInput in(enc, m, *fd);
  return pack_parts::StreamLarge(in, m, enc.policy(), enc.deflater(), w, rec, threads);
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
  return pack_parts::CheckOutput(o, {*src_abs}, out_abs);
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
  if (!o.sources.empty()) return pack_parts::PackArchives(o);
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
  pack_parts::FindRestricted(members, &stats);
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
          if (!StoredRaw(rec.codec)) ++stats.compressed_members;
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

  if (st.ok()) {
    st = pack_parts::Publish(tmp, out, manifest, stats.private_output);
  } else {
    fs::remove_all(tmp, ec);
  }
  if (!st.ok()) return st;
  stats.bytes_in = manifest.bytes;
  stats.bytes_stored = manifest.stored;
  stats.output_bytes += manifest.Encode().size();
  stats.partitions = total_parts;
  stats.sharded = nparts;
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return stats;
}

}  // namespace fanstore::meta
