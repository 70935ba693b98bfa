#include "intercept/patcher.h"

#include <gnu/libc-version.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "base/page_size.h"
#include "base/raw_syscall.h"
#include "intercept/a64.h"
#include "intercept/clone_mark.h"
#include "intercept/cpu_state.h"
#include "intercept/dispatch.h"
#include "intercept/libc_image.h"
#include "intercept/plan_cache.h"
#include "intercept/stub.h"
#include "intercept/thread_park.h"

extern "C" void fanstore_intercept_entry();

namespace fanstore::intercept {

using base::RawSyscall6;
namespace {

constexpr uint64_t kMaxStubBytes = 192;  // generous upper bound of one stub (either architecture)
#if defined(__aarch64__)
constexpr uint64_t kReach = 1ull << 27;  // b: +-128 MiB
#else
constexpr uint64_t kReach = 1ull << 31;  // jmp rel32: +-2 GiB
#endif

using base::PageSize;

// The stub of site `p` at `at`, and the bytes that replace its range (empty if out of
// reach); `map` says where each instruction of the range lies in the stub.
std::vector<uint8_t> StubFor(const SitePlan& p, uint64_t at, uint64_t slot, StubMap* map,
                             std::vector<uint8_t>* patch) {
#if defined(__aarch64__)
  // (One instruction: a thread stopped at the svc resumes at the stub's first.)
  map->points = {{0, 0}};
  std::vector<uint8_t> stub = a64::BuildStub(p, at, slot, CloneMarkTlsOffset());
  if (stub.empty() || !a64::BranchReaches(p.start, at)) return {};
  *patch = a64::BuildPatch(p, at);
#else
  std::vector<uint8_t> stub =
      BuildStub(p, reinterpret_cast<const uint8_t*>(p.start), at, slot, CloneMarkTlsOffset(), map);
  if (stub.empty() || !Rel32Reaches(p.start + 5, at)) return {};
  *patch = BuildPatch(p, at);
#endif
  return stub;
}

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Maps `size` bytes RW within reach of [lo, hi): tries hints below lo, then above hi.
void* MapNear(uint64_t lo, uint64_t hi, uint64_t size) {
  constexpr uint64_t kStep = 1ull << 20, kLimit = kReach / 2;
  for (uint64_t d = kStep; d < kLimit; d += kStep) {
    for (uint64_t hint : {(lo & ~(kStep - 1)) - d - size, ((hi + kStep) & ~(kStep - 1)) + d}) {
      void* p = ::mmap(reinterpret_cast<void*>(hint), size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
      if (p == reinterpret_cast<void*>(hint)) return p;
      // A kernel older than 4.17 (or an emulator) takes the flag for a hint it may ignore.
      if (p != MAP_FAILED) ::munmap(p, size);
    }
  }
  return nullptr;
}

// Rewrites libc's bytes. Runs with the patched part of libc's text not executable: only
// raw system calls and plain stores here, no libc call (memcpy included: hence the
// volatile loop). One RW window over all patched pages keeps it to two mprotect calls.
__attribute__((noinline)) long WritePatches(const std::vector<SitePlan>& plans,
                                            const std::vector<std::vector<uint8_t>>& patches) {
  const uint64_t page = PageSize();
  uint64_t lo = UINT64_MAX, hi = 0;
  for (size_t i = 0; i < plans.size(); ++i) {
    if (patches[i].empty()) continue;
    lo = std::min(lo, plans[i].start & ~(page - 1));
    hi = std::max(hi, (plans[i].end + page - 1) & ~(page - 1));
  }
  if (hi == 0) return 0;
  long rc = RawSyscall6(SYS_mprotect, static_cast<long>(lo), static_cast<long>(hi - lo),
                        PROT_READ | PROT_WRITE);
  if (rc != 0) return rc;
  for (size_t i = 0; i < plans.size(); ++i) {
    volatile uint8_t* dst = reinterpret_cast<volatile uint8_t*>(plans[i].start);
    const uint8_t* src = patches[i].data();
    const size_t n = patches[i].size();
    for (size_t k = 0; k < n; ++k) dst[k] = src[k];
  }
  rc = RawSyscall6(SYS_mprotect, static_cast<long>(lo), static_cast<long>(hi - lo),
                   PROT_READ | PROT_EXEC);
  // aarch64 fetches instructions through caches the stores did not go through (libgcc's
  // own code, linked in: not libc's). Nothing on x86-64.
  __builtin___clear_cache(reinterpret_cast<char*>(lo), reinterpret_cast<char*>(hi));
  return rc;
}

// One library's plan and what replaces its planned ranges: the stubs, written and
// executable, and the bytes to write over each range.
struct Prepared {
  LibcImage img;
  std::vector<SitePlan> plans;
  std::vector<std::vector<uint8_t>> patches;
  std::vector<StubMap> maps;
  std::vector<uint64_t> stub_at;
  std::vector<std::vector<uint8_t>> originals;  // each patched range's bytes before
  uint64_t stub_bytes = 0;
  bool plan_cached = false;
};

Result<Prepared> Prepare(LibcImage img, const Interest& interest) {
  Prepared out;
  const std::string cache = PlanCachePath(img, interest);
  out.plan_cached = LoadPlan(cache, img, &out.plans);
  if (!out.plan_cached) {
    img.ReadFunctionEntries();
    auto planned = PlanLibcText(img, reinterpret_cast<const uint8_t*>(img.text_start), interest);
    if (!planned.ok()) return planned.status();
    out.plans = std::move(*planned);
    StorePlan(cache, img, out.plans);
  }
  std::vector<SitePlan>& plans = out.plans;
  size_t want = 0;
  for (const SitePlan& p : plans) want += p.decision == Decision::kPatch;
  const uint64_t page = PageSize();
  const uint64_t region_size = ((want * kMaxStubBytes + 16 + page - 1) / page) * page;
  auto* region = static_cast<uint8_t*>(MapNear(img.text_start, img.text_end, region_size));
  if (!region)
    return Status::Error("no address within " + std::to_string(kReach >> 20) + " MiB of " +
                         img.path + " for the stubs");

  // The slot holding the entry's absolute address, then the stubs.
  const uint64_t slot = reinterpret_cast<uint64_t>(region);
  const uint64_t entry = reinterpret_cast<uint64_t>(&fanstore_intercept_entry);
  std::memcpy(region, &entry, 8);
  uint64_t off = 16;
  out.patches.resize(plans.size());
  out.maps.resize(plans.size());
  out.stub_at.resize(plans.size());
  for (size_t i = 0; i < plans.size(); ++i) {
    SitePlan& p = plans[i];
    if (p.decision != Decision::kPatch) continue;
    const uint64_t at = reinterpret_cast<uint64_t>(region) + off;
    std::vector<uint8_t> patch;
    std::vector<uint8_t> stub = StubFor(p, at, slot, &out.maps[i], &patch);
    if (stub.empty() || off + stub.size() > region_size) {
      p.decision = Decision::kRefused;
      p.reason = "stub out of reach";
      continue;
    }
    std::memcpy(region + off, stub.data(), stub.size());
    out.patches[i] = std::move(patch);
    out.stub_at[i] = at;
    off += (stub.size() + 15) & ~uint64_t{15};
  }
  out.stub_bytes = off;
  if (::mprotect(region, region_size, PROT_READ | PROT_EXEC) != 0)
    return Status::FromErrno("mprotect of the stubs", errno);
  __builtin___clear_cache(reinterpret_cast<char*>(region),
                          reinterpret_cast<char*>(region + region_size));
  out.img = std::move(img);
  return out;
}

}  // namespace

Result<PatchStats> Install(const HookSpec& spec) {
  const auto t0 = std::chrono::steady_clock::now();
  PatchStats st;
  if (!InitCpuState(spec.full_xsave))
    return Status::Error(
        "the CPU or kernel lacks XSAVE, or the CPU LAHF/SAHF: interception stays off");
  st.xsave_bytes = static_cast<uint32_t>(fanstore_xsave_size);
  Interest interest = spec.interest;
  interest.nrs.set(SYS_execve);
  interest.nrs.set(SYS_execveat);
  // libc, and libpthread.so.0 where it is loaded and glibc is older than 2.34: there it has
  // wrappers of its own for read, write, open, close, lseek, pread, fsync, ...
  // (cancellation points), which a program linked with it (Python, PyTorch) calls instead
  // of libc's. From 2.34 on it is an empty stub, not worth a plan's load and a stub region
  // in every process.
  std::vector<Prepared> images;
  int major = 0, minor = 0;
  std::sscanf(gnu_get_libc_version(), "%d.%d", &major, &minor);
  const bool own_pthread = major == 2 && minor < 34;
  for (const char* soname : {"libc.so.6", own_pthread ? "libpthread.so.0" : nullptr}) {
    if (!soname) continue;
    auto img = LibcImage::Locate(soname);
    if (!img.ok()) {
      if (images.empty()) return img.status();
      continue;
    }
    auto prepared = Prepare(std::move(*img), interest);
    if (!prepared.ok())
      return Status::Error(std::string(soname) + ": " + prepared.status().message());
    images.push_back(std::move(*prepared));
  }
  st.decode_ms = MsSince(t0);
  // The bytes each patch replaces, kept to undo a partial write (below). Copied now: once
  // other threads are stopped nothing may allocate (a stopped thread may hold malloc's lock).
  for (Prepared& im : images) {
    im.originals.resize(im.plans.size());
    for (size_t i = 0; i < im.plans.size(); ++i)
      if (!im.patches[i].empty())
        im.originals[i].assign(
            reinterpret_cast<const uint8_t*>(im.plans[i].start),
            reinterpret_cast<const uint8_t*>(im.plans[i].start) + im.patches[i].size());
  }

  // Threads started by an earlier constructor stop while the text changes; one stopped
  // inside a range resumes at the same instruction in its stub.
  std::vector<uint64_t*> resume_pcs;
  if (Status parked = ParkOtherThreads(&resume_pcs); !parked.ok()) return parked;
  for (uint64_t* pc : resume_pcs) {
    for (Prepared& im : images) {
      bool moved = false;
      for (size_t i = 0; i < im.plans.size(); ++i) {
        if (im.patches[i].empty() || *pc < im.plans[i].start || *pc >= im.plans[i].end) continue;
        *pc = StubPcFor(im.maps[i], im.plans[i], im.stub_at[i], *pc);
        ++st.threads_moved;
        moved = true;
        break;
      }
      if (moved) break;
    }
  }
  st.threads_stopped = static_cast<uint32_t>(resume_pcs.size());
  SetHook(spec.hook);
  SetPrefilter(spec.prefilter, spec.prefilter_again, interest);
  // All or none: a library whose text cannot be written (an mprotect refused) gets the
  // ones written before it restored, so that no call goes one way through libc and the
  // other through libpthread.
  long rc = 0;
  size_t written = 0;
  for (; rc == 0 && written < images.size(); ++written)
    rc = WritePatches(images[written].plans, images[written].patches);
  if (rc != 0)
    for (size_t k = 0; k + 1 < written; ++k) WritePatches(images[k].plans, images[k].originals);
  UnparkThreads();
  if (rc != 0)
    return Status::FromErrno("mprotect of " + images[written - 1].img.path + "'s text",
                             static_cast<int>(-rc));

  // The clone mark can be trusted only if no way into clone/vfork through these libraries
  // is left unpatched: every clone-family site and every site whose number is decided at
  // run time.
  std::vector<SitePlan> all;
  for (const Prepared& im : images) {
    all.insert(all.end(), im.plans.begin(), im.plans.end());
    st.stub_bytes += im.stub_bytes;
  }
  bool mark_complete = true;
  for (const SitePlan& p : all)
    if ((p.nr < 0 || IsCloneFamily(p.nr)) && p.decision != Decision::kPatch) mark_complete = false;
  SetCloneMarkComplete(mark_complete);
  st.clone_mark = mark_complete;
  static_cast<PlanSummary&>(st) = Summarize(all);
  for (const SitePlan& p : all) st.unknown_nr_patched += p.decision == Decision::kPatch && p.nr < 0;
  st.plan_cached = images[0].plan_cached;
  st.libraries = static_cast<uint32_t>(images.size());
  st.total_ms = MsSince(t0);
  return st;
}

}  // namespace fanstore::intercept
