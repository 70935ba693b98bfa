#include "bin/static_program.h"

#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

namespace fanstore::fanrun {
namespace {

constexpr char kUsualPath[] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

std::string FindOnPath(const std::string& program, const std::string& root) {
  if (program.find('/') != std::string::npos) return root + program;
  const char* path = root.empty() ? std::getenv("PATH") : kUsualPath;
  std::string_view dirs = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
  while (!dirs.empty()) {
    const size_t colon = dirs.find(':');
    std::string dir(dirs.substr(0, colon));
    dirs = colon == std::string_view::npos ? "" : dirs.substr(colon + 1);
    const std::string candidate = root + (dir.empty() ? "." : dir) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

enum class Kind { kOther, kDynamic, kStatic, kScript };

// What the file is, and a script's interpreter.
Kind Classify(const std::string& file, std::string* interpreter) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Kind::kOther;
  unsigned char head[256] = {};
  const ssize_t n = ::pread(fd, head, sizeof head, 0);
  Kind kind = Kind::kOther;
  if (n >= 2 && head[0] == '#' && head[1] == '!') {
    std::string_view line(reinterpret_cast<const char*>(head) + 2, static_cast<size_t>(n) - 2);
    line = line.substr(0, line.find('\n'));
    const size_t start = line.find_first_not_of(" \t");
    if (start != std::string_view::npos) {
      line = line.substr(start);
      *interpreter = std::string(line.substr(0, line.find_first_of(" \t")));
      kind = Kind::kScript;
    }
  } else if (n >= static_cast<ssize_t>(sizeof(Elf64_Ehdr)) &&
             std::memcmp(head, ELFMAG, SELFMAG) == 0 && head[EI_CLASS] == ELFCLASS64) {
    Elf64_Ehdr eh;
    std::memcpy(&eh, head, sizeof eh);
    if ((eh.e_type == ET_EXEC || eh.e_type == ET_DYN) && eh.e_phentsize == sizeof(Elf64_Phdr) &&
        eh.e_phnum > 0 && eh.e_phnum < 256) {
      std::vector<Elf64_Phdr> ph(eh.e_phnum);
      const size_t bytes = ph.size() * sizeof(Elf64_Phdr);
      if (::pread(fd, ph.data(), bytes, static_cast<off_t>(eh.e_phoff)) ==
          static_cast<ssize_t>(bytes)) {
        kind = Kind::kStatic;
        for (const Elf64_Phdr& p : ph)
          if (p.p_type == PT_INTERP) kind = Kind::kDynamic;
      }
    }
  }
  ::close(fd);
  return kind;
}

}  // namespace

std::string WithoutRuntime(const std::string& program, const std::string& root) {
  const std::string file = FindOnPath(program, root);
  if (file.empty()) return "";
  const std::string shown = file.substr(root.size());
  std::string interpreter;
  switch (Classify(file, &interpreter)) {
    case Kind::kStatic:
      return shown + " is statically linked";
    case Kind::kScript: {
      std::string unused;
      if (Classify(root + interpreter, &unused) == Kind::kStatic)
        return shown + " runs with " + interpreter + ", which is statically linked";
      return "";
    }
    default:
      return "";
  }
}

}  // namespace fanstore::fanrun
