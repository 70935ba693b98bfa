// A directory among `fanstore pack`'s sources, read through the archive readers'
// interface (EntryReader): its scanned tree in path order, each file opened below the
// directory's fd without following links, a file that shrank since the scan an error.
// Thread-safety: one thread at a time.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "meta/archive_reader.h"
#include "meta/scan.h"

namespace fanstore::meta::archive_pack {

// A directory among the sources, read as an archive of its tree in path order.
class DirReader final : public EntryReader {
 public:
  DirReader(std::string root, ScanResult scan) : root_(std::move(root)), scan_(std::move(scan)) {}
  ~DirReader() override {
    Close();
    if (rootfd_ >= 0) ::close(rootfd_);
  }
  Status Open() {
    rootfd_ = ::open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rootfd_ < 0) return Status::FromErrno(root_, errno);
    return Status::Ok();
  }
  Result<bool> Next(ArchiveEntry* e) override {
    Close();
    if (++i_ >= scan_.members.size()) return false;
    const Member& m = scan_.members[i_];
    e->path = m.path;
    e->type = m.kind == Kind::kDir       ? ArchiveEntry::kDir
              : m.kind == Kind::kSymlink ? ArchiveEntry::kSymlink
                                         : ArchiveEntry::kFile;
    e->link = m.target;
    e->mode = m.mode & 07777;
    e->uid = m.uid;
    e->gid = m.gid;
    e->mtime_ns = m.mtime_ns;
    e->size = m.size;
    e->offset = 0;
    e->has_owner = true;
    left_ = m.kind == Kind::kFile ? m.size : 0;
    if (left_ > 0) {
      fd_ = OpenRelative(rootfd_, m.path, O_RDONLY | O_NOFOLLOW);
      if (fd_ < 0) return Status::FromErrno(root_ + "/" + m.path, -fd_);
    }
    return true;
  }
  Result<size_t> ReadData(uint8_t* p, size_t n) override {
    if (left_ == 0 || n == 0) return size_t{0};
    const Member& m = scan_.members[i_];
    for (;;) {
      const ssize_t r = ::read(fd_, p, std::min<uint64_t>(n, left_));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return Status::FromErrno(root_ + "/" + m.path, errno);
      if (r == 0)
        return Status::Error(root_ + "/" + m.path + ": file changed while packing (it shrank)");
      left_ -= static_cast<uint64_t>(r);
      done_ += static_cast<uint64_t>(r);
      return static_cast<size_t>(r);
    }
  }
  uint64_t file_offset() const override { return done_; }
  const std::string& name() const override { return root_; }

 private:
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  std::string root_;
  ScanResult scan_;
  int rootfd_ = -1, fd_ = -1;
  size_t i_ = 0;  // [0] is the root, skipped
  uint64_t left_ = 0, done_ = 0;
};

}  // namespace fanstore::meta::archive_pack
