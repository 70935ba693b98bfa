// Test helpers: a self-deleting temporary directory and small file-system utilities.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace fanstore::testing {

class TempDir {
 public:
  TempDir() : TempDir(std::filesystem::temp_directory_path().string()) {}
  // In `base` (e.g. /dev/shm, for what must be on tmpfs).
  explicit TempDir(const std::string& base) {
    std::string tmpl = base + "/fanstore-test-XXXXXX";
    path_ = ::mkdtemp(tmpl.data()) ? tmpl : "";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, ec);
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// (in blocks: a character at a time took seconds per 10 MiB in sanitizer builds)
inline std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string s;
  char buf[1 << 16];
  while (f.read(buf, sizeof buf) || f.gcount() > 0) s.append(buf, static_cast<size_t>(f.gcount()));
  return s;
}

inline std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

inline std::string TextBytes(size_t n) {
  std::string s;
  while (s.size() < n) s += "the quick brown fox " + std::to_string(s.size() % 977) + "\n";
  s.resize(n);
  return s;
}

// Flips one byte of a file in place.
inline void FlipByte(const std::string& path, uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

}  // namespace fanstore::testing
