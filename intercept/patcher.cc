#include "intercept/patcher.h"

#include <sys/mman.h>
#include <sys/syscall.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "base/raw_syscall.h"
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

constexpr uint64_t kPage = 4096;
constexpr uint64_t kMaxStubBytes = 192;  // generous upper bound of one stub

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Maps `size` bytes RW within reach of [lo, hi): tries hints below lo, then above hi.
void* MapNear(uint64_t lo, uint64_t hi, uint64_t size) {
  constexpr uint64_t kStep = 1ull << 20, kLimit = 1ull << 30;
  for (uint64_t d = kStep; d < kLimit; d += kStep) {
    for (uint64_t hint : {(lo & ~(kStep - 1)) - d - size, ((hi + kStep) & ~(kStep - 1)) + d}) {
      void* p = ::mmap(reinterpret_cast<void*>(hint), size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
      if (p != MAP_FAILED) return p;
    }
  }
  return nullptr;
}

// Rewrites libc's bytes. Runs with the patched part of libc's text not executable: only
// raw system calls and plain stores here, no libc call (memcpy included: hence the
// volatile loop). One RW window over all patched pages keeps it to two mprotect calls.
__attribute__((noinline)) long WritePatches(const std::vector<SitePlan>& plans,
                                            const std::vector<std::vector<uint8_t>>& patches) {
  uint64_t lo = UINT64_MAX, hi = 0;
  for (size_t i = 0; i < plans.size(); ++i) {
    if (patches[i].empty()) continue;
    lo = std::min(lo, plans[i].start & ~(kPage - 1));
    hi = std::max(hi, (plans[i].end + kPage - 1) & ~(kPage - 1));
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
  return RawSyscall6(SYS_mprotect, static_cast<long>(lo), static_cast<long>(hi - lo),
                     PROT_READ | PROT_EXEC);
}

}  // namespace

Result<PatchStats> Install(const HookSpec& spec) {
  const auto t0 = std::chrono::steady_clock::now();
  PatchStats st;
  if (!InitCpuState(spec.full_xsave))
    return Status::Error(
        "the CPU or kernel lacks XSAVE, or the CPU LAHF/SAHF: interception stays off");
  st.xsave_bytes = static_cast<uint32_t>(fanstore_xsave_size);
  auto img = LibcImage::Locate();
  if (!img.ok()) return img.status();
  Interest interest = spec.interest;
  interest.nrs.set(SYS_execve);
  interest.nrs.set(SYS_execveat);
  std::vector<SitePlan> plans;
  const std::string cache = PlanCachePath(*img, interest);
  st.plan_cached = LoadPlan(cache, *img, &plans);
  if (!st.plan_cached) {
    img->ReadFunctionEntries();
    auto planned = PlanLibcText(*img, reinterpret_cast<const uint8_t*>(img->text_start), interest);
    if (!planned.ok()) return planned.status();
    plans = std::move(*planned);
    StorePlan(cache, *img, plans);
  }
  st.decode_ms = MsSince(t0);

  size_t want = 0;
  for (const SitePlan& p : plans) want += p.decision == Decision::kPatch;
  const uint64_t region_size = ((want * kMaxStubBytes + 8 + kPage - 1) / kPage) * kPage;
  auto* region = static_cast<uint8_t*>(MapNear(img->text_start, img->text_end, region_size));
  if (!region) return Status::Error("no address within 2 GiB of libc for the stubs");

  // The slot holding the entry's absolute address, then the stubs.
  const uint64_t slot = reinterpret_cast<uint64_t>(region);
  const uint64_t entry = reinterpret_cast<uint64_t>(&fanstore_intercept_entry);
  std::memcpy(region, &entry, 8);
  uint64_t off = 16;
  std::vector<std::vector<uint8_t>> patches(plans.size());
  std::vector<StubMap> maps(plans.size());
  std::vector<uint64_t> stub_at(plans.size());
  for (size_t i = 0; i < plans.size(); ++i) {
    SitePlan& p = plans[i];
    if (p.decision != Decision::kPatch) continue;
    const uint64_t at = reinterpret_cast<uint64_t>(region) + off;
    std::vector<uint8_t> stub = BuildStub(p, reinterpret_cast<const uint8_t*>(p.start), at, slot,
                                          CloneMarkTlsOffset(), &maps[i]);
    if (stub.empty() || off + stub.size() > region_size || !Rel32Reaches(p.start + 5, at)) {
      p.decision = Decision::kRefused;
      p.reason = "stub out of reach";
      continue;
    }
    std::memcpy(region + off, stub.data(), stub.size());
    patches[i] = BuildPatch(p, at);
    stub_at[i] = at;
    off += (stub.size() + 15) & ~uint64_t{15};
  }
  st.stub_bytes = off;
  if (::mprotect(region, region_size, PROT_READ | PROT_EXEC) != 0)
    return Status::FromErrno("mprotect of the stubs", errno);

  // Threads started by an earlier constructor stop while the text changes; one stopped
  // inside a range resumes at the same instruction in its stub.
  std::vector<uint64_t*> resume_pcs;
  if (Status parked = ParkOtherThreads(&resume_pcs); !parked.ok()) return parked;
  for (uint64_t* pc : resume_pcs) {
    for (size_t i = 0; i < plans.size(); ++i) {
      if (patches[i].empty() || *pc < plans[i].start || *pc >= plans[i].end) continue;
      *pc = StubPcFor(maps[i], plans[i], stub_at[i], *pc);
      ++st.threads_moved;
      break;
    }
  }
  st.threads_stopped = static_cast<uint32_t>(resume_pcs.size());
  SetHook(spec.hook);
  SetPrefilter(spec.prefilter, spec.prefilter_again, interest);
  const long rc = WritePatches(plans, patches);
  UnparkThreads();
  if (rc != 0) return Status::FromErrno("mprotect of libc's text", static_cast<int>(-rc));

  // The clone mark can be trusted only if no way into clone/vfork through libc is left
  // unpatched: every clone-family site and every site whose number is decided at run time.
  bool mark_complete = true;
  for (const SitePlan& p : plans)
    if ((p.nr < 0 || IsCloneFamily(p.nr)) && p.decision != Decision::kPatch) mark_complete = false;
  SetCloneMarkComplete(mark_complete);
  st.clone_mark = mark_complete;
  static_cast<PlanSummary&>(st) = Summarize(plans);
  for (const SitePlan& p : plans)
    st.unknown_nr_patched += p.decision == Decision::kPatch && p.nr < 0;
  st.total_ms = MsSince(t0);
  return st;
}

}  // namespace fanstore::intercept
