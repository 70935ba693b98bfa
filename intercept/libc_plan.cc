#include "intercept/libc_plan.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstring>

#include "intercept/a64.h"
#include "intercept/insn.h"

namespace fanstore::intercept {
namespace {

// A libc is 2-3 MiB; the decoder keeps ~40 bytes per instruction, so a larger file (a
// wrong or crafted one) would cost gigabytes to plan.
constexpr uint64_t kMaxLibcBytes = 16ull << 20;

// The architecture this build patches: its libc files are the ones it can plan.
#if defined(__aarch64__)
constexpr int kMachine = EM_AARCH64;
constexpr const char* kMachineName = "aarch64";
#else
constexpr int kMachine = EM_X86_64;
constexpr const char* kMachineName = "x86-64";
#endif

bool PreadAll(int fd, void* buf, size_t n, uint64_t off) {
  return ::pread(fd, buf, n, static_cast<off_t>(off)) == static_cast<ssize_t>(n);
}

// "2.36" from glibc's banner ("... release version 2.36."), or "".
std::string BannerVersion(const std::vector<uint8_t>& file) {
  static constexpr char kKey[] = "release version ";
  const auto* b = reinterpret_cast<const char*>(file.data());
  const size_t n = file.size(), k = sizeof kKey - 1;
  for (size_t i = 0; i + k < n; ++i) {
    if (b[i] != 'r' || std::memcmp(b + i, kKey, k) != 0) continue;
    std::string v;
    for (size_t j = i + k;
         j < n && v.size() < 16 &&
         (std::isdigit(static_cast<unsigned char>(b[j])) ||
          (b[j] == '.' && j + 1 < n && std::isdigit(static_cast<unsigned char>(b[j + 1]))));
         ++j)
      v += b[j];
    if (!v.empty()) return v;
  }
  return "";
}

}  // namespace

Result<std::vector<SitePlan>> PlanLibcText(const LibcImage& img, const uint8_t* text,
                                           const Interest& interest) {
  const uint64_t len = img.text_end - img.text_start;
#if defined(__aarch64__)
  // Only the executable sections: the segment holds read-only data too.
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& [lo, hi] : img.code_ranges)
    if (lo >= img.text_start && hi <= img.text_end && lo < hi) ranges.emplace_back(lo, hi);
  if (ranges.empty()) ranges.emplace_back(img.text_start, img.text_end);
  BranchTargets targets(img.text_start, len);
  for (uint64_t a : img.function_entries) targets.Add(a);
  for (const auto& [lo, hi] : ranges)
    a64::AddTargets(text + (lo - img.text_start), hi - lo, lo, &targets);
  std::vector<SitePlan> plans;
  for (const auto& [lo, hi] : ranges) {
    std::vector<SitePlan> part =
        a64::PlanSites(text + (lo - img.text_start), hi - lo, lo, targets, interest);
    plans.insert(plans.end(), part.begin(), part.end());
  }
  return plans;
#else
  std::vector<Insn> insns;
  const char* err = "";
  if (!DecodeRegion(text, len, img.text_start, &insns, &err)) return Status::Error(err);
  const BranchTargets targets = CollectTargets(insns, img.text_start, len, img.function_entries);
  return PlanSites(insns, targets, interest);
#endif
}

Result<LibcFile> ReadLibcFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(path, errno);
  struct stat st;
  std::vector<uint8_t> file;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
      static_cast<uint64_t>(st.st_size) <= kMaxLibcBytes) {
    file.resize(static_cast<size_t>(st.st_size));
    if (!PreadAll(fd, file.data(), file.size(), 0)) file.clear();
  }
  ::close(fd);
  if (file.empty()) return Status::Error(path + ": not a readable regular file of at most 16 MiB");
  Elf64_Ehdr eh;
  if (file.size() < sizeof eh) return Status::Error(path + ": not an ELF file");
  std::memcpy(&eh, file.data(), sizeof eh);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_machine != kMachine)
    return Status::Error(path + ": not an " + kMachineName + " ELF file");
  if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phoff > file.size() ||
      eh.e_phnum > (file.size() - eh.e_phoff) / sizeof(Elf64_Phdr))
    return Status::Error(path + ": damaged ELF program headers");
  LibcFile out;
  out.image.path = path;
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, file.data() + eh.e_phoff + i * sizeof ph, sizeof ph);
    if (ph.p_offset > file.size() || ph.p_filesz > file.size() - ph.p_offset) continue;
    const uint8_t* seg = file.data() + ph.p_offset;
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) && out.text.empty()) {
      out.image.text_start = ph.p_vaddr;
      out.image.text_end = ph.p_vaddr + ph.p_filesz;
      out.text.assign(seg, seg + ph.p_filesz);
    } else if (ph.p_type == PT_NOTE && out.image.build_id.empty()) {
      out.image.build_id = BuildIdOfNotes(seg, ph.p_filesz);
    }
  }
  if (out.text.empty()) return Status::Error(path + ": no executable segment");
  out.image.ReadFunctionEntries();
  out.version = BannerVersion(file);
  return out;
}

PlanSummary Summarize(const std::vector<SitePlan>& plans) {
  PlanSummary s;
  for (const SitePlan& p : plans) {
    ++s.sites;
    switch (p.decision) {
      case Decision::kPatch:
        ++s.patched;
        s.relocated += p.fixups_n > 0;
        break;
      case Decision::kUninteresting:
        ++s.uninteresting;
        break;
      case Decision::kOriginalFrame:
        ++s.original_frame;
        break;
      case Decision::kRefused:
        ++s.refused;
        ++s.refusals[p.reason];
        break;
    }
  }
  return s;
}

}  // namespace fanstore::intercept
