#include "intercept/libc_image.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <unistd.h>

#include <cstring>

namespace fanstore::intercept {
namespace {

bool PreadAll(int fd, void* buf, size_t n, off_t off) {
  return ::pread(fd, buf, n, off) == static_cast<ssize_t>(n);
}

std::string Hex(const uint8_t* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += d[p[i] >> 4];
    s += d[p[i] & 15];
  }
  return s;
}

// The GNU build-id note of a loaded object, from its PT_NOTE segments.
std::string BuildId(const dl_phdr_info* info) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    std::string id =
        BuildIdOfNotes(reinterpret_cast<const uint8_t*>(info->dlpi_addr + ph.p_vaddr), ph.p_memsz);
    if (!id.empty()) return id;
  }
  return "";
}

}  // namespace

std::string BuildIdOfNotes(const uint8_t* notes, size_t size) {
  size_t at = 0;
  while (at + sizeof(Elf64_Nhdr) <= size) {
    Elf64_Nhdr n;
    std::memcpy(&n, notes + at, sizeof n);
    const size_t name = at + sizeof n, desc = name + ((n.n_namesz + 3) & ~3u);
    if (desc > size || n.n_descsz > size - desc) break;
    if (n.n_type == NT_GNU_BUILD_ID && n.n_namesz == 4 && std::memcmp(notes + name, "GNU", 4) == 0)
      return Hex(notes + desc, n.n_descsz);
    at = desc + ((n.n_descsz + 3) & ~3u);
  }
  return "";
}

// Exported STT_FUNC symbols from the file's section table (.dynsym is never stripped).
void LibcImage::ReadFunctionEntries() {
  LibcImage& img = *this;
  const int fd = ::open(img.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  Elf64_Ehdr eh;
  if (PreadAll(fd, &eh, sizeof eh, 0) && eh.e_shentsize == sizeof(Elf64_Shdr) &&
      eh.e_shnum < 4096) {
    std::vector<Elf64_Shdr> sh(eh.e_shnum);
    if (PreadAll(fd, sh.data(), sh.size() * sizeof(Elf64_Shdr), static_cast<off_t>(eh.e_shoff))) {
      for (const Elf64_Shdr& s : sh)
        if (s.sh_type == SHT_PROGBITS && (s.sh_flags & SHF_EXECINSTR) && s.sh_size > 0)
          img.code_ranges.emplace_back(img.load_base + s.sh_addr,
                                       img.load_base + s.sh_addr + s.sh_size);
      for (const Elf64_Shdr& s : sh) {
        if (s.sh_type != SHT_DYNSYM || s.sh_entsize != sizeof(Elf64_Sym) || s.sh_size > (64u << 20))
          continue;
        std::vector<Elf64_Sym> syms(s.sh_size / sizeof(Elf64_Sym));
        if (!PreadAll(fd, syms.data(), syms.size() * sizeof(Elf64_Sym),
                      static_cast<off_t>(s.sh_offset)))
          continue;
        for (const Elf64_Sym& y : syms) {
          if (ELF64_ST_TYPE(y.st_info) != STT_FUNC && ELF64_ST_TYPE(y.st_info) != STT_GNU_IFUNC)
            continue;
          if (y.st_shndx == SHN_UNDEF || y.st_value == 0) continue;
          img.function_entries.push_back(img.load_base + y.st_value);
        }
      }
    }
  }
  ::close(fd);
}

namespace {

struct Search {
  const char* soname;  // "libc.so.6"
  LibcImage* img;
};

bool EndsWithSoname(const char* path, const char* soname) {
  const size_t n = std::strlen(path), k = std::strlen(soname);
  return n > k && path[n - k - 1] == '/' && std::strcmp(path + n - k, soname) == 0;
}

int Callback(dl_phdr_info* info, size_t, void* data) {
  auto* search = static_cast<Search*>(data);
  LibcImage* img = search->img;
  const char* name = info->dlpi_name;
  if (!name || !EndsWithSoname(name, search->soname)) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
      img->path = name;
      img->load_base = info->dlpi_addr;
      img->text_start = info->dlpi_addr + ph.p_vaddr;
      img->text_end = img->text_start + ph.p_memsz;
      img->build_id = BuildId(info);
      return 1;
    }
  }
  return 0;
}

}  // namespace

Result<LibcImage> LibcImage::Locate(const char* soname) {
  LibcImage img;
  Search search{soname, &img};
  if (::dl_iterate_phdr(Callback, &search) == 0 || img.text_start == 0)
    return Status::Error(std::string(soname) + " is not loaded" +
                         (std::strcmp(soname, "libc.so.6") == 0 ? " (static binary?)" : ""));
  return img;
}

}  // namespace fanstore::intercept
