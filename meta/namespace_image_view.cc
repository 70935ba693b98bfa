#include <cstring>

#include "meta/member.h"
#include "meta/namespace_image.h"
#include "meta/path_hash.h"

// The reading side of the namespace image (attach, lookup), kept apart from the builder so
// the preload library can use it without the rest of meta/.
namespace fanstore::meta {

uint64_t NamespaceView::Hash(std::string_view s) noexcept {
  return HashPath(s.data(), s.size());
}

Result<NamespaceView> NamespaceView::Attach(std::span<const uint8_t> b) {
  if (b.size() < sizeof(ImageHeader)) return Status::Error("namespace image: truncated");
  NamespaceView v;
  v.h_ = reinterpret_cast<const ImageHeader*>(b.data());
  const ImageHeader& h = *v.h_;
  if (std::memcmp(h.magic, kImageMagic.data(), 8) != 0 || h.version != kImageVersion)
    return Status::Error("namespace image: bad magic or version");
  const bool ok = h.total_size == b.size() && h.entry_count > 0 && h.entry_count < (1ull << 32) &&
                  (h.bucket_count & (h.bucket_count - 1)) == 0 && h.bucket_count >= h.entry_count &&
                  h.entries_off + h.entry_count * sizeof(ImageEntry) <= h.buckets_off &&
                  h.buckets_off + h.bucket_count * sizeof(ImageBucket) <= h.children_off &&
                  h.children_off <= h.strings_off && h.strings_off <= h.parts_off &&
                  h.parts_off <= h.total_size;
  if (!ok) return Status::Error("namespace image: inconsistent layout");
  v.entries_ = reinterpret_cast<const ImageEntry*>(b.data() + h.entries_off);
  v.buckets_ = reinterpret_cast<const ImageBucket*>(b.data() + h.buckets_off);
  v.children_ = reinterpret_cast<const uint32_t*>(b.data() + h.children_off);
  v.strings_ = reinterpret_cast<const char*>(b.data() + h.strings_off);
  const char* p = reinterpret_cast<const char*>(b.data() + h.parts_off);
  const char* end = reinterpret_cast<const char*>(b.data() + h.total_size);
  for (uint32_t i = 0; i < h.partition_count; ++i) {
    const char* z = static_cast<const char*>(std::memchr(p, 0, end - p));
    if (!z) return Status::Error("namespace image: partition paths truncated");
    v.part_paths_.push_back(p);
    p = z + 1;
  }
  return v;
}

std::string_view NamespaceView::name(const ImageEntry& e) const {
  return BaseName(path(e));
}

uint32_t NamespaceView::Lookup(std::string_view p) const noexcept {
  const uint64_t mask = h_->bucket_count - 1;
  const uint64_t hash = Hash(p);
  const uint32_t tag = static_cast<uint32_t>(hash >> 32);
  for (uint64_t b = hash & mask;; b = (b + 1) & mask) {
    const ImageBucket& k = buckets_[b];
    if (k.entry_plus_one == 0) return kNoEntry;
    if (k.tag != tag) continue;
    if (k.path_len == p.size() && std::memcmp(strings_ + k.path_off, p.data(), p.size()) == 0)
      return k.entry_plus_one - 1;
  }
}

}  // namespace fanstore::meta
