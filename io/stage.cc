#include "io/stage.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "base/map_aligned.h"
#include "compress/crc32c.h"
#include "io/stage_parts.h"
#include "meta/dataset.h"
#include "meta/member.h"
#include "meta/partition_reader.h"

namespace fanstore::io {
namespace {

constexpr size_t kChunk = 4 << 20;

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// The copy: one sequential stream, 4 MiB at a time in 1 MiB reads (ReadAt); with `map` (a
// seeded copy on tmpfs, made huge pages) each read lands in the copy through the mapping,
// with no buffer and no write between. Reads in flight at several offsets of one file
// (io_uring, 4 x 4 MiB) staged two ranks' shares of 200 MiB from MooseFS in 0.84-1.29 s
// against 0.55-0.87 s as a stream (its FUSE client reads ahead of one sequential reader),
// and from a local disk `fanrun --stage -- true` took 0.38-0.47 s cold and 0.24-0.28 s warm
// against 0.34-0.36 s and 0.18-0.20 s.
Status CopyStream(int in, int out, uint8_t* map, uint64_t size, const std::string& src,
                  const std::string& dst, const std::atomic<bool>* cancel, bool* no_room) {
  // (a FUSE client or NFS reads further ahead of a stream it is told is sequential)
  ::posix_fadvise(in, 0, 0, POSIX_FADV_SEQUENTIAL);
  std::unique_ptr<uint8_t[]> buf(map ? nullptr : new uint8_t[kChunk]);
  for (uint64_t off = 0; off < size; off += kChunk) {
    if (cancel && cancel->load(std::memory_order_relaxed))
      return Status::Error(dst + ": copy cancelled");
    const size_t len = static_cast<size_t>(std::min<uint64_t>(kChunk, size - off));
    if (!map) {
      FANSTORE_RETURN_IF_ERROR(CopyBytes(in, out, off, len, buf.get(), src, dst, no_room));
      continue;
    }
    const Status st = ReadIntoCopy(in, map + off, off, len, src, dst);
    *no_room = st.IsErrno(ENOSPC);
    FANSTORE_RETURN_IF_ERROR(st);
  }
  return Status::Ok();
}

bool HasRawBytes(const meta::MemberView& v) {
  return v.kind() == meta::Kind::kFile && meta::StoredRaw(v.codec()) && v.rec.size != 0;
}

Status MemberMismatch(const meta::MemberView& v) {
  return Status::Error(
      "member '" + meta::ShownPath(v.path) +
      "': checksum mismatch (damaged data; fanstore verify lists every damaged member)");
}

// Every raw member of the staged copy against its CRC32C, in one pass over the copy (in
// memory: 0.26-0.44 s per GiB here, against 4-18 s for the copy itself). Raw members are not
// checked when read (compressed ones are, when inflated), so a member damaged in DATA
// would otherwise reach readers as wrong bytes; now it stops the job at start, named.
Status CheckRawMembers(const meta::PartitionReader& r, int fd, uint64_t size, StageResult* out,
                       bool check_members) {
  if (size == 0) return Status::Ok();
  const long mapped = base::MapHugeAligned(fd, size);
  if (mapped < 0) return Status::FromErrno("mmap", static_cast<int>(-mapped));
  void* m = reinterpret_cast<void*>(mapped);
  // A copy on tmpfs goes into huge pages first (MADV_COLLAPSE does so whatever the mount's
  // huge= option, /dev/shm's default "never" included): the kernel then copies a member
  // out of one 2 MiB folio instead of 21 small ones, and a new process's pread of an
  // 85 KiB member runs ~2x faster (138-149 k against 66 k a second here, docs/design.md).
  // Where the kernel cannot (an older one, no memory for huge pages), the copy stays as it
  // is.
  struct statfs fs;
  // (a copy under 2 MiB has no huge page to make: neither said)
  if (::fstatfs(fd, &fs) == 0 && fs.f_type == TMPFS_MAGIC && size >= base::kHugePage) {
    // (EAGAIN: a page was busy, e.g. copied out by a reader of a landed chunk; again)
    for (int tries = 0; tries < 4; ++tries) {
      out->huge_pages = ::madvise(m, size, base::kMadvCollapse) == 0;
      if (out->huge_pages || errno != EAGAIN) break;
    }
    if (!out->huge_pages) out->small_pages_why = base::CollapseRefusal(errno);
  }
  const auto* bytes = static_cast<const uint8_t*>(m);
  Status st;
  for (size_t i = 0; check_members && i < r.size() && st.ok(); ++i) {
    const meta::MemberView v = r.member(i);
    if (!HasRawBytes(v)) continue;
    // (the reader has checked every record's bytes against the file's data region)
    if (compress::Crc32c(0, bytes + v.rec.data_offset, v.rec.size) != v.rec.crc32c)
      st = MemberMismatch(v);
  }
  ::munmap(m, size);
  return st;
}

}  // namespace

Status CheckMembersRead(const meta::PartitionReader& r, const std::string& path, int threads,
                        const std::atomic<bool>* cancel) {
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::vector<Status> found(static_cast<size_t>(std::max(threads, 1)));
  auto check = [&](Status* st) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      *st = Status::FromErrno(path, errno);
      failed = true;
      return;
    }
    constexpr size_t kStep = 1 << 20;
    std::unique_ptr<uint8_t[]> buf(new uint8_t[kStep]);
    for (size_t i; !failed.load(std::memory_order_relaxed) && (i = next.fetch_add(1)) < r.size();) {
      if (cancel && cancel->load(std::memory_order_relaxed)) {
        *st = Status::Error(path + ": check cancelled");
        break;
      }
      const meta::MemberView v = r.member(i);
      if (!HasRawBytes(v)) continue;
      uint32_t crc = 0;
      for (uint64_t done = 0; done < v.rec.size && st->ok(); done += kStep) {
        const size_t len = static_cast<size_t>(std::min<uint64_t>(kStep, v.rec.size - done));
        *st = ReadAt(fd, buf.get(), v.rec.data_offset + done, len, path);
        if (st->ok()) crc = compress::Crc32c(crc, buf.get(), len);
      }
      if (st->ok() && crc != v.rec.crc32c)
        *st = Status::Error(path + ": " + MemberMismatch(v).message());
      if (!st->ok()) break;
    }
    ::close(fd);
    if (!st->ok()) failed = true;
  };
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < found.size(); ++t) helpers.emplace_back(check, &found[t]);
  check(&found[0]);
  for (std::thread& t : helpers) t.join();
  for (const Status& st : found)
    if (!st.ok()) return st;
  return Status::Ok();
}

Status ReadAt(int in, uint8_t* to, uint64_t off, size_t len, const std::string& src) {
  for (size_t got = 0; got < len;) {
    // (1 MiB at a time: four streams of 4 MiB reads from MooseFS's FUSE client took
    // 0.68-0.72 s and 1.07-1.12 CPU-seconds for 200 MiB, of 1 MiB 0.60 s and 1.0)
    const size_t want = std::min<size_t>(len - got, 1u << 20);
    const ssize_t n = ::pread(in, to + got, want, static_cast<off_t>(off + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(src, errno);
    if (n == 0) return Status::Error(src + ": shorter than expected");
    got += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status FetchAt(int in, int sink, uint8_t* buf, uint64_t off, size_t len, const std::string& src) {
  size_t got = 0;
  while (sink >= 0 && got < len) {
    off_t at = static_cast<off_t>(off + got);
    const ssize_t n = ::sendfile(sink, in, &at, std::min<size_t>(len - got, 1u << 20));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)) break;
    if (n < 0) return Status::FromErrno(src, errno);
    if (n == 0) return Status::Error(src + ": shorter than expected");
    got += static_cast<size_t>(n);
  }
  return got < len ? ReadAt(in, buf, off + got, len - got, src) : Status::Ok();
}

namespace {

// `src` opened again, when it is still the file `in` reads; else -1.
int OpenSameFile(int in, const std::string& src) {
  const int fd = ::open(src.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat was, now;
  if (fd >= 0 && ::fstat(in, &was) == 0 && ::fstat(fd, &now) == 0 && was.st_dev == now.st_dev &&
      was.st_ino == now.st_ino)
    return fd;
  if (fd >= 0) ::close(fd);
  return -1;
}

}  // namespace

int OpenAgain(int in, const std::string& src) {
  const int fd = OpenSameFile(in, src);
  return fd >= 0 ? fd : ::fcntl(in, F_DUPFD_CLOEXEC, 0);
}

int OpenAside(int in, const std::string& src) {
  const int fd = OpenSameFile(in, src);
  if (fd >= 0) ::posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
  return fd;
}

Status ReadIntoCopy(int in, uint8_t* to, uint64_t off, size_t len, const std::string& src,
                    const std::string& dst) {
  const Status st = ReadAt(in, to, off, len, src);
  return st.IsErrno(EFAULT) ? Status::FromErrno(dst, ENOSPC) : st;
}

Status CopyBytes(int in, int out, uint64_t off, size_t len, uint8_t* buf, const std::string& src,
                 const std::string& dst, bool* no_room) {
  FANSTORE_RETURN_IF_ERROR(ReadAt(in, buf, off, len, src));
  for (size_t put = 0; put < len;) {
    const ssize_t n = ::pwrite(out, buf + put, len - put, static_cast<off_t>(off + put));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      if (errno == ENOSPC || errno == EDQUOT) *no_room = true;
      return Status::FromErrno(dst, errno);
    }
    put += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Result<StageResult> FinishCopy(const std::string& src, const std::string& tmp,
                               const std::string& dst, const meta::Manifest& manifest, uint32_t id,
                               uint64_t size, bool check_members) {
  meta::PartitionReader reader;
  if (Status s = reader.Open(tmp); !s.ok()) {
    ::unlink(tmp.c_str());
    return Status::Error(src + " (staged copy): " + s.message());
  }
  if (Status s = meta::CheckAgainstManifest(reader, manifest, id); !s.ok()) {
    ::unlink(tmp.c_str());
    return Status::Error(src + ": " + s.message());
  }
  StageResult r;
  if (Status s = CheckRawMembers(reader, reader.fd(), size, &r, check_members); !s.ok()) {
    ::unlink(tmp.c_str());
    return Status::Error(src + ": " + s.message());
  }
  if (::rename(tmp.c_str(), dst.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    return Status::FromErrno(dst, e);
  }
  r.bytes = size;
  return r;
}

// Opens `src`, checks its size against the manifest, and makes `tmp` with room for it.
Result<uint64_t> OpenCopy(const std::string& src, const std::string& tmp, const std::string& dst,
                          const meta::Manifest& manifest, uint32_t id, int* in, int* out,
                          bool* no_room, bool* seeded) {
  *in = ::open(src.c_str(), O_RDONLY | O_CLOEXEC);
  if (*in < 0) return Status::FromErrno(src, errno);
  struct stat st;
  if (::fstat(*in, &st) != 0) return Status::FromErrno(src, errno);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (id < manifest.partitions.size() && manifest.partitions[id].file_size != size)
    return Status::Error(src + ": " + std::to_string(size) + " bytes, the manifest says " +
                         std::to_string(manifest.partitions[id].file_size) +
                         " (truncated or replaced)");
  *out = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (*out < 0) {
    *no_room = errno == ENOSPC || errno == EDQUOT;
    return Status::FromErrno(tmp, errno);
  }
  struct statfs fs;
  if (seeded) *seeded = false;
  if (seeded && size >= base::kHugePage && ::fstatfs(*out, &fs) == 0 && fs.f_type == TMPFS_MAGIC) {
    // One page per 2 MiB, which MADV_COLLAPSE makes a zeroed huge page: allocating every
    // page first would have the collapse copy 512 zero pages into each (200 MiB: 150 ms of
    // fallocate and collapse against 40). The room is checked instead of reserved.
    if (static_cast<uint64_t>(fs.f_bavail) * fs.f_bsize < size) {
      ::unlink(tmp.c_str());
      *no_room = true;
      return Status::FromErrno(dst, ENOSPC);
    }
    if (::ftruncate(*out, static_cast<off_t>(size)) != 0) {
      const int e = errno;
      ::unlink(tmp.c_str());
      return Status::FromErrno(dst, e);
    }
    for (uint64_t off = 0; off + base::kHugePage <= size; off += base::kHugePage)
      if (const int rc = ::posix_fallocate(*out, static_cast<off_t>(off), 4096); rc != 0) {
        ::unlink(tmp.c_str());
        *no_room = rc == ENOSPC || rc == EDQUOT;
        return Status::FromErrno(dst, rc);
      }
    *seeded = true;
    return size;
  }
  // Reserve the space first: a full local disk fails here, at once, not half-way.
  if (const int rc = ::posix_fallocate(*out, 0, static_cast<off_t>(size));
      rc != 0 && rc != EOPNOTSUPP && rc != EINVAL) {
    ::unlink(tmp.c_str());
    *no_room = rc == ENOSPC || rc == EDQUOT;
    return Status::FromErrno(dst, rc);
  }
  return size;
}

std::string ShmemCollapseError() {
  const int fd = static_cast<int>(::syscall(SYS_memfd_create, "fanstore-probe", MFD_CLOEXEC));
  if (fd < 0) return std::string("memfd_create: ") + std::strerror(errno);
  std::string err;
  if (::ftruncate(fd, base::kHugePage) != 0)
    err = std::string("ftruncate: ") + std::strerror(errno);
  // (one seed page, as OpenCopy leaves a landing copy: the collapse makes the rest)
  if (err.empty() && ::posix_fallocate(fd, 0, 4096) != 0) err = "no memory for shmem";
  if (err.empty()) {
    const long m = base::MapHugeAligned(fd, base::kHugePage);
    if (m < 0) {
      err = std::string("mmap: ") + std::strerror(static_cast<int>(-m));
    } else {
      if (::madvise(reinterpret_cast<void*>(m), base::kHugePage, base::kMadvCollapse) != 0)
        err = base::CollapseRefusal(errno);
      ::munmap(reinterpret_cast<void*>(m), base::kHugePage);
    }
  }
  ::close(fd);
  return err;
}

Result<StageResult> StagePartition(const std::string& src, const std::string& dst,
                                   const meta::Manifest& manifest, uint32_t id,
                                   const std::atomic<bool>* cancel, bool* no_room) {
  const auto t0 = std::chrono::steady_clock::now();
  bool room_unused = false;
  if (!no_room) no_room = &room_unused;
  *no_room = false;
  const std::string tmp = dst + ".staging";
  int in_fd = -1, out_fd = -1;
  bool seeded = false;
  auto size = OpenCopy(src, tmp, dst, manifest, id, &in_fd, &out_fd, no_room, &seeded);
  Fd in(in_fd), out(out_fd);
  if (!size.ok()) return size.status();
  // A copy on tmpfs, seeded with a page per 2 MiB, is made huge pages before it is written:
  // the collapse then makes zeroed huge pages instead of copying the written small pages
  // into them after the copy (4 partitions, 200 MiB from the page cache: 0.33-0.37 s
  // staged, against 0.40-0.45 s collapsing after).
  uint8_t* map = nullptr;
  if (seeded) {
    const long m = base::MapHugeAligned(out.get(), *size, PROT_READ | PROT_WRITE);
    if (m >= 0) {
      map = reinterpret_cast<uint8_t*>(m);
      ::madvise(map, *size, base::kMadvCollapse);
    }
  }
  const Status copied = CopyStream(in.get(), out.get(), map, *size, src, dst, cancel, no_room);
  if (map) ::munmap(map, *size);
  if (!copied.ok()) {
    ::unlink(tmp.c_str());
    return copied;
  }
  auto r = FinishCopy(src, tmp, dst, manifest, id, *size, true);
  if (r.ok())
    r->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace fanstore::io
