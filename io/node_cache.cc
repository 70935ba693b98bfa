#include "io/node_cache.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace fanstore::io {
namespace {

constexpr uint64_t kPage = 4096;
// Admitting one member re-admits at most this many second-chance members (each one's flag
// is cleared when it is re-admitted, so this only bounds readers that keep setting them).
constexpr int kMaxSecondChances = 64;

uint64_t RoundUp(uint64_t v, uint64_t a) {
  return (v + a - 1) / a * a;
}

// Whether `fd`'s file system reports room for `bytes` more. A failing fallocate on tmpfs
// takes every free page before it gives them back, and meanwhile another process writing
// there (another job's agent, or a rank of the same host creating its arena) would fail; so
// an allocation that cannot fit is not attempted. (f_blocks 0: a file system that reports
// no size, such as a tmpfs mounted without a limit, is given the benefit of the doubt.)
bool RoomFor(int fd, uint64_t bytes) {
  struct statfs fs;
  return ::fstatfs(fd, &fs) != 0 || fs.f_blocks == 0 ||
         static_cast<uint64_t>(fs.f_bavail) * static_cast<uint64_t>(fs.f_bsize) >= bytes;
}

}  // namespace

NodeCache::~NodeCache() {
  Close();
}

void NodeCache::Close() {
  if (meta_) ::munmap(meta_, meta_bytes_);
  if (data_) ::munmap(data_, data_bytes_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  meta_ = data_ = refs_ = nullptr;
  table_ = nullptr;
  meta_bytes_ = data_offset_ = data_bytes_ = head_ = used_ = generation_ = allocated_ = 0;
  in_memory_ = allocate_failed_ = false;
  entries_ = 0;
  ring_.clear();
  evictions_ = second_chances_ = ahead_wasted_ = ahead_used_ = 0;
}

Status NodeCache::Create(const std::string& path, uint32_t entries, uint64_t data_bytes) {
  Close();
  data_bytes = data_bytes / kArenaAlign * kArenaAlign;
  if (data_bytes / kArenaAlign >= (uint64_t{1} << kArenaOffsetBits))
    return Status::Error(path + ": node cache too large");
  ArenaHeader h{};
  std::memcpy(h.magic, kArenaMagic, sizeof h.magic);
  h.version = kArenaVersion;
  h.entries = entries;
  h.table_offset = sizeof h;
  h.refs_offset = RoundUp(h.table_offset + uint64_t{entries} * 8, kPage);
  h.data_offset = RoundUp(h.refs_offset + entries, kPage);
  h.data_bytes = data_bytes;
  h.file_bytes = h.data_offset + data_bytes;
  ::unlink(path.c_str());
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd_ < 0) return Status::FromErrno(path, errno);
  if (!RoomFor(fd_, h.data_offset)) return Status::FromErrno(path, ENOSPC);
  if (int rc = ::posix_fallocate(fd_, 0, static_cast<off_t>(h.data_offset)); rc != 0)
    return Status::FromErrno(path, rc);
  if (::ftruncate(fd_, static_cast<off_t>(h.file_bytes)) != 0)
    return Status::FromErrno(path, errno);
  void* m = ::mmap(nullptr, h.data_offset, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (m == MAP_FAILED) return Status::FromErrno(path, errno);
  meta_ = static_cast<uint8_t*>(m);
  meta_bytes_ = h.data_offset;
  std::memcpy(meta_, &h, sizeof h);  // readers check it, after the table (zeroed by fallocate)
  table_ = reinterpret_cast<uint64_t*>(meta_ + h.table_offset);
  refs_ = meta_ + h.refs_offset;
  entries_ = entries;
  data_offset_ = h.data_offset;
  data_bytes_ = data_bytes;
  struct statfs fs;
  in_memory_ = ::fstatfs(fd_, &fs) == 0 && fs.f_type == TMPFS_MAGIC;
  if (data_bytes_ > 0) {  // (written through only where its pages are allocated: see Place)
    void* d = ::mmap(nullptr, data_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_,
                     static_cast<off_t>(data_offset_));
    if (d != MAP_FAILED) data_ = static_cast<uint8_t*>(d);
  }
  return Status::Ok();
}

void NodeCache::EvictFront(std::vector<std::pair<uint32_t, std::vector<uint8_t>>>* again) {
  const Slot s = ring_.front();
  ring_.pop_front();
  used_ -= s.len;
  const uint64_t word = __atomic_load_n(&table_[s.entry], __ATOMIC_RELAXED);
  // Readers that copy from here from now on will see the word gone (or changed).
  __atomic_store_n(&table_[s.entry], 0, __ATOMIC_SEQ_CST);
  const bool read = __atomic_exchange_n(&refs_[s.entry], 0, __ATOMIC_RELAXED) != 0;
  if (s.ahead) ++(read ? ahead_used_ : ahead_wasted_);
  if (read && again && again->size() < kMaxSecondChances) {
    std::vector<uint8_t> bytes(s.bytes);
    if (word != 0 &&
        ::pread(fd_, bytes.data(), s.bytes, static_cast<off_t>(data_offset_ + s.off)) ==
            static_cast<ssize_t>(s.bytes)) {
      again->emplace_back(s.entry, std::move(bytes));
      ++second_chances_;
      return;
    }
  }
  ++evictions_;
}

void NodeCache::MakeRoom(uint64_t need,
                         std::vector<std::pair<uint32_t, std::vector<uint8_t>>>* again) {
  // Live slots lie in ring order from the front (the oldest, at or after head_ in the
  // previous lap) round to head_. Wrapping first drops the previous lap's slots past head_.
  if (head_ + need > data_bytes_) {
    while (!ring_.empty() && ring_.front().off >= head_) EvictFront(again);
    head_ = 0;
  }
  while (!ring_.empty() && ring_.front().off >= head_ && ring_.front().off < head_ + need)
    EvictFront(again);
}

Status NodeCache::Place(uint32_t entry, const uint8_t* bytes, uint64_t len, bool ahead,
                        std::vector<std::pair<uint32_t, std::vector<uint8_t>>>* again) {
  const uint64_t need = RoundUp(len, kArenaAlign);
  MakeRoom(need, again);
  const uint64_t off = head_;
  const bool mapped = data_ && len > 0 && off + len <= allocated_;  // (memcpy takes no null source)
  if (mapped) {
    // The pages exist (a store into a page tmpfs cannot allocate would be a SIGBUS): copy
    // through the mapping, after the evicted members' cleared words.
#if defined(__x86_64__)
    __asm__ __volatile__("" ::: "memory");  // (x86-64 keeps stores in program order)
#else
    __atomic_thread_fence(__ATOMIC_RELEASE);
#endif
    std::memcpy(data_ + off, bytes, len);
  }
  for (uint64_t done = mapped ? len : 0; done < len;) {  // elsewhere: pwrite
    const ssize_t n =
        ::pwrite(fd_, bytes + done, len - done, static_cast<off_t>(data_offset_ + off + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::FromErrno("node cache", n < 0 ? errno : EIO);
    done += static_cast<uint64_t>(n);
  }
  head_ += need;
  used_ += need;
  allocated_ = std::max(allocated_, RoundUp(head_, kPage));  // (pwrite allocated what it wrote)
  ring_.push_back(Slot{entry, off, need, len, ahead});
  generation_ = (generation_ + 1) & ((uint64_t{1} << (64 - kArenaOffsetBits)) - 1);
  if (generation_ == 0) generation_ = 1;
  __atomic_store_n(&refs_[entry], 0, __ATOMIC_RELAXED);
  __atomic_store_n(&table_[entry], (generation_ << kArenaOffsetBits) | (off / kArenaAlign),
                   __ATOMIC_RELEASE);
  return Status::Ok();
}

Status NodeCache::Admit(uint32_t entry, const uint8_t* bytes, uint64_t len, bool ahead) {
  if (entry >= entries_ || len > max_member())
    return Status::Error("node cache: member does not fit");
  if (Contains(entry)) return Status::Ok();
  std::vector<std::pair<uint32_t, std::vector<uint8_t>>> again;
  Status st = Place(entry, bytes, len, ahead, &again);
  // Second chances: re-admitted at the head (their flags are clear now, so each is copied
  // once per lap); one that no longer fits is simply evicted.
  for (size_t i = 0; st.ok() && i < again.size(); ++i) {
    const uint32_t e = again[i].first;
    const std::vector<uint8_t> b = std::move(again[i].second);  // `again` may grow below
    if (!Contains(e)) st = Place(e, b.data(), b.size(), false, &again);
  }
  return st;
}

bool NodeCache::Preallocate(uint64_t ahead, uint64_t step) {
  if (fd_ < 0 || allocate_failed_ || allocated_ >= data_bytes_) return false;
  const uint64_t want = std::min(data_bytes_, RoundUp(head_ + ahead, kPage));
  if (allocated_ >= want) return false;
  const uint64_t n = std::min(RoundUp(step, kPage), want - allocated_);
  int rc;
  do {
    rc = ::fallocate(fd_, 0, static_cast<off_t>(data_offset_ + allocated_), static_cast<off_t>(n));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    allocate_failed_ = true;
    return false;
  }
  allocated_ += n;
  return true;
}

Status NodeCache::AllocateUpTo(uint64_t bytes) {
  const uint64_t want = std::min(data_bytes_, RoundUp(bytes, kPage));
  if (fd_ < 0 || allocated_ >= want) return Status::Ok();
  if (!RoomFor(fd_, want - allocated_))
    return Status::FromErrno(std::to_string(want - allocated_) + " bytes", ENOSPC);
  int rc;
  do {
    rc = ::fallocate(fd_, 0, static_cast<off_t>(data_offset_ + allocated_),
                     static_cast<off_t>(want - allocated_));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) return Status::FromErrno(std::to_string(want - allocated_) + " bytes", errno);
  // The page tables too, on tmpfs only: elsewhere (an SSD --local-dir) prefaulting for
  // writing would dirty every page and write the whole cache's zeros to the device.
  if (data_ && in_memory_) ::madvise(data_ + allocated_, want - allocated_, MADV_POPULATE_WRITE);
  allocated_ = want;
  return Status::Ok();
}

bool NodeCache::Read(uint32_t entry, uint64_t len, std::vector<uint8_t>* out) const {
  if (!Contains(entry)) return false;
  const uint64_t off = ArenaDataOffset(__atomic_load_n(&table_[entry], __ATOMIC_RELAXED));
  if (off > data_bytes_ || len > data_bytes_ - off) return false;
  out->resize(len);
  return ::pread(fd_, out->data(), len, static_cast<off_t>(data_offset_ + off)) ==
         static_cast<ssize_t>(len);
}

}  // namespace fanstore::io
