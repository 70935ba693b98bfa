#include <cstring>
#include <string>

#include "meta/access.h"
#include "meta/member.h"
#include "meta/namespace_image.h"
#include "meta/path_hash.h"

// The reading side of the namespace image (attach, lookup), kept apart from the builder so
// the preload library can use it without the rest of meta/.
namespace fanstore::meta {

uint64_t NamespaceView::Hash(std::string_view s) noexcept {
  return HashPath(s.data(), s.size());
}

namespace {

bool Aligned(uint64_t off, uint64_t align) {
  return off % align == 0;
}

// a + b * c, false on overflow.
bool End(uint64_t a, uint64_t b, uint64_t c, uint64_t* out) {
  uint64_t m;
  return !__builtin_mul_overflow(b, c, &m) && !__builtin_add_overflow(a, m, out);
}

Status Bad(const std::string& what) {
  return Status::Error("namespace image: " + what);
}

}  // namespace

Result<NamespaceView> NamespaceView::Attach(std::span<const uint8_t> b) {
  auto v = AttachLayout(b);
  if (!v.ok()) return v;
  if (Status st = v->CheckEntries((v->h_->strings_off - v->h_->children_off) / 4,
                                  v->h_->parts_off - v->h_->strings_off);
      !st.ok())
    return st;
  return v;
}

Result<NamespaceView> NamespaceView::AttachLayout(std::span<const uint8_t> b) {
  if (b.size() < sizeof(ImageHeader)) return Bad("truncated");
  if (!Aligned(reinterpret_cast<uintptr_t>(b.data()), alignof(ImageEntry)))
    return Bad("not aligned in memory");
  NamespaceView v;
  v.h_ = reinterpret_cast<const ImageHeader*>(b.data());
  const ImageHeader& h = *v.h_;
  if (std::memcmp(h.magic, kImageMagic.data(), 8) != 0 || h.version != kImageVersion)
    return Bad("bad magic or version");
  const uint64_t n = h.entry_count;
  uint64_t entries_end, buckets_end;
  const bool layout =
      h.total_size == b.size() && n > 0 && n < kNoEntry && h.bucket_count > n &&
      (h.bucket_count & (h.bucket_count - 1)) == 0 && h.partition_count <= kMaxPartitions &&
      Aligned(h.entries_off, 64) && Aligned(h.buckets_off, 8) && Aligned(h.children_off, 4) &&
      h.entries_off >= sizeof(ImageHeader) &&
      End(h.entries_off, n, sizeof(ImageEntry), &entries_end) && entries_end <= h.buckets_off &&
      End(h.buckets_off, h.bucket_count, sizeof(ImageBucket), &buckets_end) &&
      buckets_end <= h.children_off && h.children_off <= h.strings_off &&
      h.strings_off <= h.parts_off && h.parts_off <= h.total_size;
  if (!layout) return Bad("inconsistent layout");
  v.entries_ = reinterpret_cast<const ImageEntry*>(b.data() + h.entries_off);
  v.buckets_ = reinterpret_cast<const ImageBucket*>(b.data() + h.buckets_off);
  v.children_ = reinterpret_cast<const uint32_t*>(b.data() + h.children_off);
  v.strings_ = reinterpret_cast<const char*>(b.data() + h.strings_off);
  const char* p = reinterpret_cast<const char*>(b.data() + h.parts_off);
  const char* end = reinterpret_cast<const char*>(b.data() + h.total_size);
  for (uint32_t i = 0; i < h.partition_count; ++i) {
    const char* z = static_cast<const char*>(std::memchr(p, 0, static_cast<size_t>(end - p)));
    if (!z) return Bad("partition paths truncated");
    v.part_paths_.push_back(p);
    p = z + 1;
  }
  return v;
}

Status NamespaceView::CheckEntries(uint64_t child_slots, uint64_t string_bytes) const {
  const uint64_t n = h_->entry_count;
  uint64_t children_used = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const ImageEntry& e = entries_[i];
    const auto at = [i] { return "entry " + std::to_string(i) + ": "; };  // (only on error)
    const uint32_t type = e.mode & 0170000u;
    const bool dir = e.kind == static_cast<uint8_t>(Kind::kDir);
    const bool link = e.kind == static_cast<uint8_t>(Kind::kSymlink);
    const bool file = e.kind == static_cast<uint8_t>(Kind::kFile);
    if (!(dir && type == 0040000u) && !(link && type == 0120000u) && !(file && type == 0100000u))
      return Bad(at() + "kind and mode disagree");
    uint64_t path_end;
    if (!End(e.path_off, e.path_len, 1, &path_end) || path_end > string_bytes ||
        (link && (!End(path_end, e.size, 1, &path_end) || path_end > string_bytes)))
      return Bad(at() + "path outside the string table");
    if (e.parent >= n || entries_[e.parent].kind != static_cast<uint8_t>(Kind::kDir))
      return Bad(at() + "parent is not a directory");
    const ImageEntry& parent = entries_[e.parent];
    // (a parent may come later, its path not yet checked: compared below, it must be inside)
    if (!End(parent.path_off, parent.path_len, 1, &path_end) || path_end > string_bytes)
      return Bad(at() + "its parent's path is outside the string table");
    const bool open = (parent.flags & kEntryPathOpen) && OpenToAll(parent.mode, kMayExec);
    if (i == 0) {
      if (!dir || e.parent != 0 || e.path_len != 0 || e.flags != kEntryPathOpen)
        return Bad("the root is not a directory at the empty path");
    } else {
      // The parent's path is this path's parent path: shorter, so parents never loop.
      if (path(e).empty() || ParentPath(path(e)) != path(parent))
        return Bad(at() + "its parent's path is not its parent path");
      if (e.flags != (open ? kEntryPathOpen : 0))
        return Bad(at() + "flags disagree with the parents' modes");
    }
    if (dir) {
      uint64_t last;
      if (!End(e.first_child, e.child_count, 1, &last) || last > child_slots)
        return Bad(at() + "children outside the children table");
      children_used += e.child_count;
      for (uint32_t c = 0; c < e.child_count; ++c) {
        const uint32_t k = children_[e.first_child + c];
        if (k == 0 || k >= n || entries_[k].parent != i)
          return Bad(at() + "a child that is not its own");
      }
    } else if (e.partition >= h_->partition_count || e.codec > kMaxCodec) {
      return Bad(at() + "partition or codec out of range");
    }
  }
  if (children_used != n - 1) return Bad("children do not list every entry once");
  uint64_t used = 0;
  for (uint64_t k = 0; k < h_->bucket_count; ++k) {
    const ImageBucket& bk = buckets_[k];
    if (bk.entry_plus_one == 0) continue;
    if (bk.entry_plus_one > n) return Bad("bucket " + std::to_string(k) + ": no such entry");
    const ImageEntry& e = entries_[bk.entry_plus_one - 1];
    if (bk.path_off != e.path_off || bk.path_len != e.path_len)
      return Bad("bucket " + std::to_string(k) + ": path is not its entry's");
    ++used;
  }
  if (used != n) return Bad("buckets do not hold every entry once");
  return Status::Ok();
}

std::string_view NamespaceView::name(const ImageEntry& e) const {
  return BaseName(path(e));
}

uint32_t NamespaceView::Lookup(std::string_view p) const noexcept {
  return ProbeBuckets(buckets_, h_->bucket_count - 1, Hash(p), p.size(), [&](const ImageBucket& k) {
    return std::memcmp(strings_ + k.path_off, p.data(), p.size()) == 0;
  });
}

}  // namespace fanstore::meta
