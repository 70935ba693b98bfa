// The steps of a copy that the one-partition stage-in (io/stage.cc) and the landing copy of
// several (io/stage_landing.cc) share.
// Thread-safety: reentrant.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "io/stage.h"
#include "meta/manifest.h"

namespace fanstore::io {

// `len` bytes at `off` of `in` (`src`) read into `to`, in reads of 1 MiB at most.
Status ReadAt(int in, uint8_t* to, uint64_t off, size_t len, const std::string& src);
// `len` bytes at `off` of `in` (`src`) read into the page cache and dropped: spliced to
// `sink` (/dev/null) by sendfile, the pages referenced, not copied (a FUSE client's 246 MB
// copied out cost 0.17 CPU-seconds, on a node the fetch and its client keep busy); through
// `buf` (`len` bytes) by reads where `sink` is -1 or the file system cannot splice.
Status FetchAt(int in, int sink, uint8_t* buf, uint64_t off, size_t len, const std::string& src);
// `in`'s file (`src`) opened again, for reads out of the order `in` was streamed in: a FUSE
// client keeps reading ahead on a handle it saw read in order (MooseFS pulled 2.1 MB for a
// 20 KB re-read of pages the kernel had dropped since, 0.02 MB through another handle). A
// duplicate of `in` when `src` now names another file (the copy is of the bytes that
// landed) or cannot be opened; -1 only when neither can be had.
int OpenAgain(int in, const std::string& src);
// `in`'s file (`src`) opened again for chunks read out of order beside `in`'s stream, told
// its reads are random (POSIX_FADV_RANDOM): a chunk read far ahead through the stream's own
// handle made MooseFS's client pull 13 MB more than asked, 2 MB through such a handle. -1
// when `src` no longer names that file (the stream's handle is read then).
int OpenAside(int in, const std::string& src);
// The same into a shared mapping of the copy `dst` at `to`: a page of the copy the kernel
// cannot fault in (tmpfs filled since its room was checked) is ENOSPC for `dst`, as a write
// would say.
Status ReadIntoCopy(int in, uint8_t* to, uint64_t off, size_t len, const std::string& src,
                    const std::string& dst);
// `len` bytes at `off` of `in` (`src`) written at the same offset of `out` (`dst`), through
// `buf` (len bytes). *no_room: failed for want of room only.
Status CopyBytes(int in, int out, uint64_t off, size_t len, uint8_t* buf, const std::string& src,
                 const std::string& dst, bool* no_room);
// Opens `src` into *in, checks its size against the manifest's partition `id`, and makes
// `tmp` (*out) with room for it; returns the size. *no_room: failed for want of room only.
// With `seeded`, a copy of 2 MiB or more on tmpfs has its room checked,
// not reserved, and one page per 2 MiB allocated, for MADV_COLLAPSE to make each a huge
// page before it is written; *seeded says whether that was done.
Result<uint64_t> OpenCopy(const std::string& src, const std::string& tmp, const std::string& dst,
                          const meta::Manifest& manifest, uint32_t id, int* in, int* out,
                          bool* no_room, bool* seeded);
// The complete copy at `tmp` checked as partition `id` (header, footer, index, manifest,
// and with `check_members` every raw member's CRC32C; made huge pages on tmpfs) and renamed
// to `dst`; removed when it fails. A copy read while it is made is not checked member by
// member here: its readers check each raw member at its first read on the node, as they
// do for DATA's (runtime/data/verified.h), and a second pass would put the CRC of the whole
// share on the first epoch's path.
Result<StageResult> FinishCopy(const std::string& src, const std::string& tmp,
                               const std::string& dst, const meta::Manifest& manifest, uint32_t id,
                               uint64_t size, bool check_members);

}  // namespace fanstore::io
