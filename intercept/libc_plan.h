// Planning a whole libc: its text decoded, its branch targets collected and every syscall
// site given a decision (planner.h). The patcher plans the loaded libc this way on a plan
// cache miss; `fanrun doctor` plans any libc file, the running one or another release's,
// without loading or patching it.
// Thread-safety: reentrant.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "intercept/libc_image.h"
#include "intercept/planner.h"

namespace fanstore::intercept {

// Plans `text` (the bytes of [img.text_start, img.text_end)) with img.function_entries
// as extra branch targets.
Result<std::vector<SitePlan>> PlanLibcText(const LibcImage& img, const uint8_t* text,
                                           const Interest& interest);

// A libc file as the planner sees it: addresses are the file's virtual addresses (load
// base 0); `version` is the release in its banner ("2.36"), "" if it has none.
struct LibcFile {
  LibcImage image;
  std::vector<uint8_t> text;
  std::string version;
};
Result<LibcFile> ReadLibcFile(const std::string& path);

struct PlanSummary {
  uint64_t sites = 0, patched = 0, uninteresting = 0, original_frame = 0, refused = 0;
  uint64_t relocated = 0;                    // patched with at least one fixup
  std::map<std::string, uint64_t> refusals;  // reason -> count
};
PlanSummary Summarize(const std::vector<SitePlan>& plans);

}  // namespace fanstore::intercept
