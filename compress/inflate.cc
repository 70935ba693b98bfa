#include "compress/inflate.h"

#include <isa-l/igzip_lib.h>

#include <cerrno>

namespace fanstore::compress {

struct Inflater::State {
  inflate_state s;
};

Inflater::Inflater() : state_(std::make_unique<State>()) {
  Reset();
}
Inflater::~Inflater() = default;

void Inflater::Reset() noexcept {
  isal_inflate_init(&state_->s);
  state_->s.crc_flag = ISAL_DEFLATE;
}

int Inflater::Step(std::span<const uint8_t> in, std::span<uint8_t> out, size_t* consumed,
                   size_t* produced) noexcept {
  inflate_state& s = state_->s;
  const uint32_t in_len = in.size() > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(in.size());
  const uint32_t out_len = out.size() > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(out.size());
  s.next_in = const_cast<uint8_t*>(in.data());
  s.avail_in = in_len;
  s.next_out = out.data();
  s.avail_out = out_len;
  const int rc = isal_inflate(&s);
  *consumed = in_len - s.avail_in;
  *produced = out_len - s.avail_out;
  if (rc < 0) return -EBADMSG;
  return s.block_state == ISAL_BLOCK_FINISH ? 1 : 0;
}

int InflateExact(std::span<const uint8_t> in, std::span<uint8_t> out) noexcept {
  // Stateless inflate needs the whole stream and an exact-size output: the common case of
  // a small member. It cannot tell "stream longer than out" from overflow, so both fail.
  if (in.size() <= UINT32_MAX && out.size() <= UINT32_MAX) {
    inflate_state s;
    isal_inflate_init(&s);
    s.crc_flag = ISAL_DEFLATE;
    s.next_in = const_cast<uint8_t*>(in.data());
    s.avail_in = static_cast<uint32_t>(in.size());
    s.next_out = out.data();
    s.avail_out = static_cast<uint32_t>(out.size());
    const int rc = isal_inflate_stateless(&s);
    if (rc != ISAL_DECOMP_OK || s.avail_out != 0) return -EBADMSG;
    return 0;
  }
  Inflater inf;
  size_t in_pos = 0, out_pos = 0;
  for (;;) {
    size_t c = 0, p = 0;
    const int rc = inf.Step(in.subspan(in_pos), out.subspan(out_pos), &c, &p);
    in_pos += c;
    out_pos += p;
    if (rc < 0) return rc;
    if (rc == 1) return out_pos == out.size() ? 0 : -EBADMSG;
    if (c == 0 && p == 0) return -EBADMSG;  // no progress: truncated, or output full
  }
}

}  // namespace fanstore::compress
