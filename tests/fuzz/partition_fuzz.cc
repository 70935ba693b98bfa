// PartitionReader over any bytes (as a file: it reads with pread): Open fails with a
// message, or every member's view and bytes can be read (each an error or its bytes),
// never a crash or a read outside the file.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "meta/partition_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = ::memfd_create("partition", MFD_CLOEXEC);
  if (fd < 0) return 0;
  if (::write(fd, data, size) != static_cast<ssize_t>(size)) {
    ::close(fd);
    return 0;
  }
  {
    fanstore::meta::PartitionReader r;
    if (r.Open("/proc/self/fd/" + std::to_string(fd)).ok()) {
      uint64_t sum = 0;
      for (size_t i = 0; i < r.size() && i < 4096; ++i) {
        const fanstore::meta::MemberView v = r.member(i);
        sum += v.path.size() + v.target.size();
        if (v.kind() == fanstore::meta::Kind::kDir || v.rec.size > (64u << 20)) continue;
        (void)r.ReadMember(i, [&](std::span<const uint8_t> b) {
          sum += b.size();
          return true;
        });
      }
      if (sum == 1) ::write(-1, &sum, 0);  // (keeps the reads from being optimised away)
    }
  }
  ::close(fd);
  return 0;
}
