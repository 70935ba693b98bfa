#include "intercept/plan_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/env_names.h"

namespace fanstore::intercept {
namespace {

constexpr char kMagic[8] = {'F', 'S', 'I', 'P', 'L', 'A', 'N', '4'};
constexpr size_t kMaxRange = 32;
#if defined(__aarch64__)
constexpr uint32_t kMinRange = 4;  // the svc alone (a64.h)
#else
constexpr uint32_t kMinRange = 5;  // room for jmp rel32 (planner.h)
#endif

struct Record {  // offsets from text_start
  uint32_t syscall_off, start_off, end_off;
  int32_t nr;
  uint32_t decision;
  uint8_t bytes[kMaxRange];  // the original bytes of [start, end) for patched sites
  uint8_t fixups_n;
  Fixup fixups[kMaxFixups];
};

// Fixups in order, inside the range, apart from each other and from the syscall itself
// (BuildStub copies the bytes before and after it separately).
bool ValidFixups(const Record& r) {
  if (r.fixups_n > kMaxFixups) return false;
  const uint32_t range = r.end_off - r.start_off, sc = r.syscall_off - r.start_off;
  for (uint8_t k = 0; k < r.fixups_n; ++k) {
    const Fixup& f = r.fixups[k];
    if (f.at + f.len > range || (k > 0 && f.at < r.fixups[k - 1].at + r.fixups[k - 1].len))
      return false;
    if (f.at < sc + 2 && f.at + f.len > sc) return false;
    if (f.kind == FixKind::kRipDisp
            ? f.disp_at == 0 || f.disp_at + 4 > f.len
            : f.kind != FixKind::kBranch || (f.len != 2 && f.len != 5 && f.len != 6))
      return false;
  }
  return true;
}

std::string CacheDir() {
  if (const char* d = std::getenv(env::kCacheDir); d && *d) return d;
  const std::string dir = "/dev/shm/fanstore-" + std::to_string(::getuid());
  ::mkdir(dir.c_str(), 0700);
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid() ||
      (st.st_mode & 022))
    return "";
  return dir;
}

uint64_t InterestHash(const Interest& in) {
  uint64_t h = in.all ? 0x9E3779B97F4A7C15ull : 1469598103934665603ull;
  for (int i = 0; i < kMaxSyscallNr; ++i)
    if (in.nrs.test(i)) h = (h ^ static_cast<uint64_t>(i + 1)) * 1099511628211ull;
  return h;
}

}  // namespace

std::string PlanCachePath(const LibcImage& img, const Interest& interest) {
  if (img.build_id.empty()) return "";
  const std::string dir = CacheDir();
  if (dir.empty()) return "";
  char name[160];
  std::snprintf(name, sizeof name, "/intercept-plan-%s-%llx-%016llx", img.build_id.c_str(),
                static_cast<unsigned long long>(img.text_end - img.text_start),
                static_cast<unsigned long long>(InterestHash(interest)));
  return dir + name;
}

bool LoadPlan(const std::string& path, const LibcImage& img, std::vector<SitePlan>* plans) {
  if (path.empty()) return false;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  struct stat st;
  std::vector<char> buf;
  if (::fstat(fd, &st) == 0 && st.st_size >= 16 && st.st_size < (16 << 20) &&
      st.st_uid == ::getuid()) {
    buf.resize(static_cast<size_t>(st.st_size));
    if (::pread(fd, buf.data(), buf.size(), 0) != static_cast<ssize_t>(buf.size())) buf.clear();
  }
  ::close(fd);
  if (buf.size() < 16 || std::memcmp(buf.data(), kMagic, 8) != 0) return false;
  uint64_t n = 0;
  std::memcpy(&n, buf.data() + 8, 8);
  if (n > 100000 || buf.size() != 16 + n * sizeof(Record)) return false;
  const uint64_t len = img.text_end - img.text_start;
  std::vector<SitePlan> out;
  for (uint64_t i = 0; i < n; ++i) {
    Record r;
    std::memcpy(&r, buf.data() + 16 + i * sizeof(Record), sizeof r);
    if (r.decision > static_cast<uint32_t>(Decision::kRefused) || r.syscall_off >= len)
      return false;
    SitePlan p;
    p.syscall_addr = img.text_start + r.syscall_off;
    p.nr = r.nr;
    p.decision = static_cast<Decision>(r.decision);
    if (p.decision == Decision::kPatch) {
      if (r.start_off > r.syscall_off || r.end_off > len || r.end_off < r.syscall_off + 2 ||
          r.end_off - r.start_off < kMinRange || r.end_off - r.start_off > kMaxRange ||
          !ValidFixups(r))
        return false;
      p.start = img.text_start + r.start_off;
      p.end = img.text_start + r.end_off;
      if (std::memcmp(reinterpret_cast<const void*>(p.start), r.bytes, p.end - p.start) != 0)
        return false;  // libc is not what the plan was made for
      p.fixups_n = r.fixups_n;
      std::copy(r.fixups, r.fixups + r.fixups_n, p.fixups.begin());
    } else {
      p.reason = "as planned by an earlier process (see the plan cache)";
    }
    out.push_back(p);
  }
  *plans = std::move(out);
  return true;
}

void StorePlan(const std::string& path, const LibcImage& img, const std::vector<SitePlan>& plans) {
  if (path.empty()) return;
  std::string data(kMagic, 8);
  const uint64_t n = plans.size();
  data.append(reinterpret_cast<const char*>(&n), 8);
  for (const SitePlan& p : plans) {
    Record r{};
    r.syscall_off = static_cast<uint32_t>(p.syscall_addr - img.text_start);
    if (p.decision == Decision::kPatch) {
      if (p.end - p.start > kMaxRange) return;  // cannot happen: ranges are <= 4 instructions
      r.start_off = static_cast<uint32_t>(p.start - img.text_start);
      r.end_off = static_cast<uint32_t>(p.end - img.text_start);
      std::memcpy(r.bytes, reinterpret_cast<const void*>(p.start), p.end - p.start);
      r.fixups_n = p.fixups_n;
      std::copy(p.fixups.begin(), p.fixups.begin() + p.fixups_n, r.fixups);
    }
    r.nr = p.nr;
    r.decision = static_cast<uint32_t>(p.decision);
    data.append(reinterpret_cast<const char*>(&r), sizeof r);
  }
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return;
  const bool ok = ::write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size());
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) ::unlink(tmp.c_str());
}

}  // namespace fanstore::intercept
