// The plan cache: decoding all of libc takes ~25-40 ms, too much for every process start,
// so the first process stores its plan in a file named after libc's build-id, the text
// size and the interest set, and later processes load it. Each patched range's original
// bytes are stored with it, and a loaded plan is used only if libc still has exactly those
// bytes there (so loading needs no decoder at all).
// Directory: $FANSTORE_CACHE_DIR, else /dev/shm/fanstore-<uid> (created 0700; used only if
// it is a real directory owned by this user). Files are written to a temporary name and
// renamed, so concurrent processes never read a partial plan.
// Thread-safety: call from the constructor only.
#pragma once

#include <string>
#include <vector>

#include "intercept/libc_image.h"
#include "intercept/planner.h"

namespace fanstore::intercept {

// "" if no usable cache directory (or libc has no build-id).
std::string PlanCachePath(const LibcImage& img, const Interest& interest);
bool LoadPlan(const std::string& path, const LibcImage& img, std::vector<SitePlan>* plans);
void StorePlan(const std::string& path, const LibcImage& img, const std::vector<SitePlan>& plans);

}  // namespace fanstore::intercept
