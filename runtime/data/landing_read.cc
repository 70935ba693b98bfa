// Reads of a partition while fanrun copies it to local storage (io/landing.h): the first
// epoch of a job on a shared file system. A read whose chunks have landed is served at once:
// from DATA, whose page cache holds them, where the copier fetches first, else from the copy.
// One whose chunks have not asks for them, and the copier, which reads large chunks in a few
// streams, takes them next: the shared file system then sees each byte once, in 1 MiB
// reads, instead of the copy's stream and the readers' small random reads competing for it.
#include "base/clock.h"
#include "runtime/data/member_io_parts.h"

namespace fanstore::runtime {

long ReadLanded(State& s, uint32_t p, void* buf, size_t len, uint64_t off) {
  io::LandingMap& m = s.landing;
  if (!m.valid() || p >= m.parts() || m.chunks(p) == 0 || m.State(p) == io::LandingState::kFailed)
    return kNotLanded;
  if (!m.RangeLanded(p, off, len)) {
    if (!m.Copying()) return kNotLanded;  // (not started yet, or stopped)
    g_io.landing_waits.Add(1);
    m.Want(p, off, len);
    io::LandingPatience patience(m.Progress(), base::MonotonicNs());
    for (;;) {
      const uint32_t seen = m.Count(p);
      if (m.RangeLanded(p, off, len)) break;
      if (m.State(p) == io::LandingState::kFailed || !m.Copying()) return kNotLanded;
      const int64_t now = base::MonotonicNs();
      if (patience.Expired(now, m.Progress())) {  // (a stuck copy: DATA it is)
        g_io.landing_gave_up.Add(1);
        return kNotLanded;
      }
      m.Wait(p, seen, std::min<int64_t>(patience.Left(now), 50'000'000));
    }
  }
  g_io.landed.Add(1);
  if (m.FromData()) return kNotLanded;  // (cached: the caller's own read of DATA)
  const int fd = s.LandingFd(p);
  if (fd < 0) return kNotLanded;
  return PreadBlob(fd, buf, len, off);
}

}  // namespace fanstore::runtime
