// The identity (device, inode) of every DATA blob fanrun holds open for the job, in a file
// beside the namespace image. A served process reaches a held blob through its link in the
// rank's `data/` directory; inside a container that link cannot reach fanrun's descriptor
// (another user namespace), so DATA itself is bound there (bin/container.h), and the
// runtime checks that the file it opened is the one the job started with: a dataset
// repacked under the job is refused, never read. (Inline: fanrun writes the file without
// linking the runtime.)
// Thread-safety: pure functions.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace fanstore::runtime {

inline std::string HeldIdsPathBeside(const std::string& image_path) {
  return image_path.substr(0, image_path.rfind('/') + 1) + "held-ids";
}

struct BlobId {
  uint64_t dev = 0, ino = 0;  // 0, 0: not known
  bool known() const { return dev != 0 || ino != 0; }
  bool Same(const struct stat& st) const {
    return static_cast<uint64_t>(st.st_dev) == dev && static_cast<uint64_t>(st.st_ino) == ino;
  }
};

// One line of the file: "PARTITION DEV INO\n".
inline std::string HeldIdLine(uint32_t partition, const struct stat& st) {
  return std::to_string(partition) + " " + std::to_string(static_cast<uint64_t>(st.st_dev)) + " " +
         std::to_string(static_cast<uint64_t>(st.st_ino)) + "\n";
}

// Calls f(partition, id) for each well-formed line of `text`.
template <typename F>
void ForEachHeldId(std::string_view text, F&& f) {
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string line(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    unsigned long long p = 0, dev = 0, ino = 0;
    if (std::sscanf(line.c_str(), "%llu %llu %llu", &p, &dev, &ino) == 3 && p < (1ull << 32))
      f(static_cast<uint32_t>(p), BlobId{dev, ino});
  }
}

}  // namespace fanstore::runtime
