#include "bin/fanrun_doctor.h"

#include <fcntl.h>
#include <liburing.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "base/map_aligned.h"
#include "base/page_size.h"
#include "bin/cli_util.h"
#include "bin/launcher.h"
#include "bin/mount_choice.h"
#include "bin/mpi_load.h"
#include "bin/node_memory.h"
#include "intercept/libc_image.h"
#include "intercept/libc_plan.h"
#include "io/stage.h"
#include "meta/dataset.h"
#include "runtime/calls/served_calls.h"

namespace fanstore::fanrun {
namespace {

struct Problem {
  std::string what, fix;
};

struct LibcReport {
  std::string path, version, build_id, error;
  bool unreadable = false;  // not a libc file this can read
  intercept::PlanSummary plan;
  std::vector<intercept::SitePlan> refused;
};

// The kernel: its release, io_uring, and the page settings that change how fast staged
// copies and page-cached blobs are read.
struct KernelReport {
  std::string release, uring_error;
  std::string thp, shmem_thp;  // transparent_hugepage/enabled and shmem_enabled: the [choice]
  bool collapse = false;       // MADV_COLLAPSE made a shmem file huge pages (as staging does)
  std::string collapse_error;
};

struct SpaceReport {
  std::string path, fs, error;
  uint64_t bytes = 0, free = 0;
};

std::string Hex(uint64_t x) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(x));
  return b;
}

LibcReport CheckLibc(const DoctorOptions& opt, std::vector<Problem>* problems) {
  LibcReport r;
  r.path = opt.libc;
  if (r.path.empty()) {
    auto img = intercept::LibcImage::Locate();
    if (!img.ok()) {
      r.error = img.status().message();
      problems->push_back({"no libc.so.6 in this process: " + r.error,
                           "FanStore serves dynamically linked programs only"});
      return r;
    }
    r.path = img->path;
  }
  auto file = intercept::ReadLibcFile(r.path);
  if (!file.ok()) {
    r.error = file.status().message();
    r.unreadable = true;
    if (opt.libc.empty()) problems->push_back({"the running libc: " + r.error, ""});
    return r;
  }
  r.version = file->version;
  r.build_id = file->image.build_id;
  auto plans = intercept::PlanLibcText(file->image, file->text.data(), runtime::ServedInterest());
  if (!plans.ok()) {
    r.error = plans.status().message();
    problems->push_back({"interception is off: " + r.error,
                         "install the Zydis 4 library (Debian: apt-get install libzydis4)"});
    return r;
  }
  r.plan = intercept::Summarize(*plans);
  for (const intercept::SitePlan& p : *plans)
    if (p.decision == intercept::Decision::kRefused) r.refused.push_back(p);
  if (r.plan.refused > 0)
    problems->push_back(
        {std::to_string(r.plan.refused) + " syscall site(s) of interest in " + r.path +
             " cannot be patched: calls made there reach the kernel, which sees only "
             "fanrun's empty directories",
         "report the sites below (fanrun doctor --json) with the libc's version"});
  return r;
}

std::string FsName(int64_t type) {
  constexpr uint64_t kLustre = 0x0BD00BD0, kGpfs = 0x47504653;  // not in <linux/magic.h>
  switch (static_cast<uint64_t>(type)) {
    case TMPFS_MAGIC:
      return "tmpfs";
    case EXT4_SUPER_MAGIC:
      return "ext4";
    case XFS_SUPER_MAGIC:
      return "xfs";
    case BTRFS_SUPER_MAGIC:
      return "btrfs";
    case FUSE_SUPER_MAGIC:
      return "fuse";
    case NFS_SUPER_MAGIC:
      return "nfs";
    case CEPH_SUPER_MAGIC:
      return "ceph";
    case OVERLAYFS_SUPER_MAGIC:
      return "overlayfs";
    case V9FS_MAGIC:
      return "9p";
    case kLustre:
      return "lustre";
    case kGpfs:
      return "gpfs";
    default:
      return Hex(static_cast<uint64_t>(type));
  }
}

SpaceReport CheckSpace(const std::string& path) {
  SpaceReport r;
  r.path = path;
  struct statvfs v;
  struct statfs f;
  if (::statvfs(path.c_str(), &v) != 0 || ::statfs(path.c_str(), &f) != 0) {
    r.error = std::strerror(errno);
    return r;
  }
  r.fs = FsName(f.f_type);
  r.bytes = static_cast<uint64_t>(v.f_blocks) * v.f_frsize;
  r.free = static_cast<uint64_t>(v.f_bavail) * v.f_frsize;
  return r;
}

std::string IoUringError() {
  io_uring ring;
  const int rc = io_uring_queue_init(2, &ring, 0);
  if (rc < 0) return std::strerror(-rc);
  io_uring_queue_exit(&ring);
  return "";
}

// The bracketed choice of a transparent_hugepage setting ("never" in "always [never]"), or
// "unknown".
std::string ThpChoice(const char* name) {
  std::string text;
  if (FILE* f =
          std::fopen((std::string("/sys/kernel/mm/transparent_hugepage/") + name).c_str(), "r")) {
    char buf[256];
    const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    text.assign(buf, n);
  }
  const size_t a = text.find('['), b = text.find(']');
  return a == std::string::npos || b == std::string::npos || b < a ? "unknown"
                                                                   : text.substr(a + 1, b - a - 1);
}

KernelReport CheckKernel() {
  KernelReport k;
  utsname u{};
  ::uname(&u);
  k.release = std::string(u.release) + " " + u.machine;
  k.uring_error = IoUringError();
  k.thp = ThpChoice("enabled");
  k.shmem_thp = ThpChoice("shmem_enabled");
  k.collapse_error = io::ShmemCollapseError();
  k.collapse = k.collapse_error.empty();
  return k;
}

// The MPI fanrun would use under a launcher (bin/mpi_load.h): its family, the library's
// own one-line version and its path; or why none loads, a problem only under a launcher (a
// process alone needs no MPI).
std::string MpiLibrary(std::vector<Problem>* problems) {
  auto c = cli::LoadMpi();
  if (!c.ok()) {
    if (cli::LaunchedByMpi()) problems->push_back({c.status().message(), ""});
    return "none loadable: " + c.status().message();
  }
  std::string v = c->mpi->Version();
  v = v.substr(0, v.find('\n'));
  for (char& ch : v)
    if (ch == '\t') ch = ' ';
  while (!v.empty() && (v.back() == ' ' || v.back() == ',' || v.back() == '\0')) v.pop_back();
  return v + " (" + c->family + ": " + c->library + ")";
}

struct DataReport {
  std::string dir, error, source, compress, mount_refusal;
  uint64_t files = 0, bytes = 0, stored = 0, partitions = 0;
};

DataReport CheckData(const std::string& dir, std::vector<Problem>* problems) {
  DataReport r;
  r.dir = dir;
  auto ds = meta::Dataset::Open(dir);
  if (!ds.ok()) {
    r.error = ds.status().message();
    problems->push_back(
        {"--data " + dir + ": " + r.error, "pack it again with fanstore pack, or copy it again"});
    return r;
  }
  const meta::Manifest& m = (*ds)->manifest();
  r.source = m.source;
  r.compress = m.compress;
  r.files = m.files;
  r.bytes = m.bytes;
  r.stored = m.stored;
  r.partitions = m.partitions.size();
  r.mount_refusal = DefaultMountRefusal(m.source);
  return r;
}

void PrintHuman(const DoctorOptions& opt, const LibcReport& libc, const KernelReport& kernel,
                const SpaceReport& shm, const SpaceReport* local, const std::string& mpi,
                const std::string& launcher, const DataReport* data,
                const std::vector<Problem>& problems) {
  std::printf("fanrun doctor, fanrun %s\n", FANSTORE_VERSION);
  if (!libc.error.empty()) {
    std::printf("libc      %s: %s\n", libc.path.c_str(), libc.error.c_str());
  } else {
    std::printf("libc      %s, glibc %s, build-id %s\n", libc.path.c_str(),
                libc.version.empty() ? "?" : libc.version.c_str(),
                libc.build_id.empty() ? "none" : libc.build_id.c_str());
    const auto& p = libc.plan;
    std::printf(
        "          %llu syscall sites: %llu patched (%llu with moved instructions), %llu left "
        "(not of interest), %llu left (original frame), %llu refused\n",
        static_cast<unsigned long long>(p.sites), static_cast<unsigned long long>(p.patched),
        static_cast<unsigned long long>(p.relocated),
        static_cast<unsigned long long>(p.uninteresting),
        static_cast<unsigned long long>(p.original_frame),
        static_cast<unsigned long long>(p.refused));
    for (const auto& s : libc.refused)
      std::printf("          refused %s (syscall %d): %s\n", Hex(s.syscall_addr).c_str(), s.nr,
                  s.reason.c_str());
  }
  std::printf("kernel    %s; io_uring %s\n", kernel.release.c_str(),
              kernel.uring_error.empty()
                  ? "available"
                  : ("unavailable: " + kernel.uring_error +
                     " (staging copies with plain reads and writes, a member "
                     "not in the page cache is read with pread)")
                        .c_str());
  // (The base page: 4 KiB on x86-64, often 64 KiB on Grace nodes; a member whose data does
  // not start on one is mapped through a copy.)
  const std::string page = std::to_string(base::PageSize() / 1024) + " KiB";
  std::printf("pages     %s, transparent huge pages %s, shmem %s; staged copies %s\n", page.c_str(),
              kernel.thp.c_str(), kernel.shmem_thp.c_str(),
              kernel.collapse ? "in huge pages (MADV_COLLAPSE)"
                              : ("in " + page + " pages: " + kernel.collapse_error +
                                 " (reads from them are slower)")
                                    .c_str());
  for (const SpaceReport* s : {&shm, local}) {
    if (!s) continue;
    if (s->error.empty())
      std::printf("%-9s %s: %s, %s, %s free\n", s == &shm ? "shm" : "local dir", s->path.c_str(),
                  s->fs.c_str(), cli::HumanBytes(static_cast<double>(s->bytes)).c_str(),
                  cli::HumanBytes(static_cast<double>(s->free)).c_str());
    else
      std::printf("%-9s %s: %s\n", s == &shm ? "shm" : "local dir", s->path.c_str(),
                  s->error.c_str());
  }
  // (what decides whether fanrun copies DATA from a local disk: bin/stage_decision.h)
  const uint64_t available = MemAvailable(), room = CgroupRoom();
  std::string memory = cli::HumanBytes(static_cast<double>(available)) + " available";
  if (room != UINT64_MAX)
    memory +=
        ", " + cli::HumanBytes(static_cast<double>(room)) + " left in this job's memory cgroup";
  if (kernel.collapse)
    memory += "; a local DATA share up to " +
              cli::HumanBytes(static_cast<double>(std::min(available, room) / 2)) +
              " is copied to /dev/shm in huge pages on one node, on the CPU and disk time the "
              "command leaves idle (reads go to DATA until it is copied)";
  std::printf("memory    %s\n", memory.c_str());
  std::printf("MPI       %s; launcher: %s\n", mpi.c_str(),
              launcher.empty() ? "none (fanrun alone serves one node)" : launcher.c_str());
  if (data) {
    if (data->error.empty())
      std::printf(
          "dataset   %s: %llu files, %s (%s stored, %s) in %llu partitions; packed from %s\n",
          data->dir.c_str(), static_cast<unsigned long long>(data->files),
          cli::HumanBytes(static_cast<double>(data->bytes)).c_str(),
          cli::HumanBytes(static_cast<double>(data->stored)).c_str(), data->compress.c_str(),
          static_cast<unsigned long long>(data->partitions), data->source.c_str());
    else
      std::printf("dataset   %s\n", data->error.c_str());
  }
  if (opt.preload.empty())
    std::printf("runtime   libfanstore.so: not found\n");
  else
    std::printf("runtime   %s\n", opt.preload.c_str());
  for (const Problem& p : problems)
    std::printf("problem: %s%s%s\n", p.what.c_str(), p.fix.empty() ? "" : "; ", p.fix.c_str());
  if (problems.empty())
    std::printf("verdict: ok, nothing found that stands in the way\n");
  else
    std::printf("verdict: %zu problem(s)\n", problems.size());
}

std::string J(const std::string& s) {
  return cli::JsonString(s);
}
std::string N(uint64_t x) {
  return std::to_string(x);
}

std::string SpaceJson(const SpaceReport* s) {
  if (!s) return "null";
  if (!s->error.empty()) return "{\"path\":" + J(s->path) + ",\"error\":" + J(s->error) + "}";
  return "{\"path\":" + J(s->path) + ",\"fs\":" + J(s->fs) + ",\"bytes\":" + N(s->bytes) +
         ",\"free_bytes\":" + N(s->free) + "}";
}

void PrintJson(const DoctorOptions& opt, const LibcReport& libc, const KernelReport& kernel,
               const SpaceReport& shm, const SpaceReport* local, const std::string& mpi,
               const std::string& launcher, const DataReport* data,
               const std::vector<Problem>& problems) {
  std::string o = "{\"fanrun\":" + J(FANSTORE_VERSION);
  const auto& p = libc.plan;
  o += ",\"libc\":{\"path\":" + J(libc.path) + ",\"version\":" + J(libc.version) +
       ",\"build_id\":" + J(libc.build_id) + ",\"error\":" + J(libc.error) +
       ",\"sites\":" + N(p.sites) + ",\"patched\":" + N(p.patched) +
       ",\"relocated\":" + N(p.relocated) + ",\"uninteresting\":" + N(p.uninteresting) +
       ",\"original_frame\":" + N(p.original_frame) + ",\"refused\":" + N(p.refused) +
       ",\"refused_sites\":[";
  for (size_t i = 0; i < libc.refused.size(); ++i)
    o += std::string(i ? "," : "") + "{\"address\":" + J(Hex(libc.refused[i].syscall_addr)) +
         ",\"nr\":" + std::to_string(libc.refused[i].nr) +
         ",\"reason\":" + J(libc.refused[i].reason) + "}";
  o += "]}";
  o += ",\"kernel\":{\"release\":" + J(kernel.release) +
       ",\"io_uring\":" + (kernel.uring_error.empty() ? "true" : "false") +
       ",\"io_uring_error\":" + J(kernel.uring_error) + ",\"thp\":" + J(kernel.thp) +
       ",\"shmem_thp\":" + J(kernel.shmem_thp) +
       ",\"staged_huge_pages\":" + (kernel.collapse ? "true" : "false") +
       ",\"staged_huge_pages_error\":" + J(kernel.collapse_error) + "}";
  o += ",\"shm\":" + SpaceJson(&shm) + ",\"local_dir\":" + SpaceJson(local);
  const uint64_t room = CgroupRoom();
  o += ",\"memory_available\":" + std::to_string(MemAvailable()) +
       ",\"cgroup_room\":" + (room == UINT64_MAX ? std::string("null") : std::to_string(room));
  o += ",\"mpi\":{\"library\":" + J(mpi) + ",\"launcher\":" + J(launcher) + "}";
  if (!data) {
    o += ",\"data\":null";
  } else {
    o += ",\"data\":{\"dir\":" + J(data->dir) + ",\"error\":" + J(data->error) +
         ",\"files\":" + N(data->files) + ",\"bytes\":" + N(data->bytes) +
         ",\"stored\":" + N(data->stored) + ",\"partitions\":" + N(data->partitions) +
         ",\"source\":" + J(data->source) + "}";
  }
  o += ",\"runtime\":" + J(opt.preload) + ",\"problems\":[";
  for (size_t i = 0; i < problems.size(); ++i)
    o += std::string(i ? "," : "") + "{\"problem\":" + J(problems[i].what) +
         ",\"fix\":" + J(problems[i].fix) + "}";
  o += "]}\n";
  std::fputs(o.c_str(), stdout);
}

}  // namespace

int Doctor(const DoctorOptions& opt) {
  std::vector<Problem> problems;
  const LibcReport libc = CheckLibc(opt, &problems);
  if (!opt.libc.empty() && libc.unreadable) {
    cli::Error("fanrun", "doctor --libc " + libc.error);
    return cli::kExitUsage;
  }
  const KernelReport kernel = CheckKernel();
  const SpaceReport shm = CheckSpace("/dev/shm");
  if (!shm.error.empty())
    problems.push_back(
        {"/dev/shm: " + shm.error, "fanrun keeps its job directory there; ask the admin for one"});
  SpaceReport local_report;
  if (!opt.local_dir.empty()) {
    // fanrun makes a missing --local-dir (like mkdir -p): what matters then is the nearest
    // existing ancestor, where it would be made.
    std::error_code ec;
    std::filesystem::path ancestor = opt.local_dir;
    while (!ancestor.empty() && !std::filesystem::exists(ancestor, ec))
      ancestor = ancestor.has_relative_path() ? ancestor.parent_path() : std::filesystem::path();
    const std::string where = ancestor.empty() ? "." : ancestor.string();
    local_report = CheckSpace(where);
    if (where != opt.local_dir)
      local_report.path = opt.local_dir + " (to be made in " + where + ")";
    if (!local_report.error.empty())
      problems.push_back({"--local-dir " + opt.local_dir + ": " + local_report.error,
                          "give a directory on node-local storage"});
    else if (::access(where.c_str(), W_OK | X_OK) != 0)
      problems.push_back(
          {"--local-dir " + opt.local_dir + ": " + where + " is not writable by this user",
           "give a directory of yours on node-local storage"});
  }
  const SpaceReport* local = opt.local_dir.empty() ? nullptr : &local_report;
  DataReport data_report;
  if (!opt.data.empty()) {
    data_report = CheckData(opt.data, &problems);
    if (data_report.error.empty() && !data_report.mount_refusal.empty())
      problems.push_back({data_report.mount_refusal, ""});
  }
  const std::string mpi = MpiLibrary(&problems);
  const std::string launcher = cli::LauncherName();
  if (const std::string why = cli::SrunWithoutPmi(); !why.empty()) problems.push_back({why, ""});
  if (opt.preload.empty())
    problems.push_back({"libfanstore.so is not next to fanrun (../lib or the build tree)",
                        "install FanStore with cmake --install, or set FANSTORE_PRELOAD"});
  const DataReport* data = opt.data.empty() ? nullptr : &data_report;
  if (opt.json)
    PrintJson(opt, libc, kernel, shm, local, mpi, launcher, data, problems);
  else
    PrintHuman(opt, libc, kernel, shm, local, mpi, launcher, data, problems);
  return problems.empty() ? 0 : 1;
}

}  // namespace fanstore::fanrun
