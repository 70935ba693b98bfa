// NamespaceView::Attach over any bytes: an error, or an image whose every entry, parent
// chain, child list, symlink target, partition path and lookup can be walked, never a
// crash, an endless probe or a read outside the bytes; parents always lead to the root.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "meta/namespace_image.h"

using fanstore::meta::ImageEntry;
using fanstore::meta::Kind;
using fanstore::meta::NamespaceView;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // (an image lives in a page-aligned mapping; libFuzzer's buffer need not be aligned)
  std::unique_ptr<uint8_t[], decltype(&std::free)> copy(
      static_cast<uint8_t*>(std::aligned_alloc(64, (size + 64) & ~size_t{63})), &std::free);
  if (size) std::memcpy(copy.get(), data, size);
  auto v = NamespaceView::Attach({copy.get(), size});
  if (!v.ok()) return 0;
  uint64_t sum = 0;
  for (uint32_t i = 0; i < v->size(); ++i) {
    const ImageEntry& e = v->entry(i);
    sum += v->path(e).size() + v->name(e).size();
    sum += v->Lookup(v->path(e));  // (a damaged table may miss it: kNoEntry, not a crash)
    for (uint32_t up = i, hops = 0; up != 0; up = v->entry(up).parent)
      if (++hops > 65536) std::abort();  // parents lead to the root
    if (e.kind == static_cast<uint8_t>(Kind::kDir))
      for (uint32_t c = 0; c < e.child_count; ++c) sum += v->entry(v->Child(e, c)).size;
    else if (e.kind == static_cast<uint8_t>(Kind::kSymlink))
      sum += v->target(e).size();
    else
      sum += std::strlen(v->partition_path(e.partition));
  }
  sum += v->Lookup("no/such/path") != fanstore::meta::kNoEntry;
  if (sum == 1) std::free(nullptr);  // (keeps the walk from being optimised away)
  return 0;
}
