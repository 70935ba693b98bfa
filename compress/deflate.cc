#include "compress/deflate.h"

#include <isa-l/igzip_lib.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace fanstore::compress {
namespace {

uint32_t LevelBufSize(int level) {
  switch (level) {
    case 1:
      return ISAL_DEF_LVL1_DEFAULT;
    case 2:
      return ISAL_DEF_LVL2_DEFAULT;
    case 3:
      return ISAL_DEF_LVL3_DEFAULT;
    default:
      return 0;
  }
}

}  // namespace

struct Deflater::State {
  isal_zstream stream;
  std::vector<uint8_t> level_buf;
};

Deflater::Deflater(int level) : level_(level), state_(std::make_unique<State>()) {
  if (level < kMinLevel || level > kMaxLevel)
    throw std::invalid_argument("deflate level out of range");
  state_->level_buf.resize(LevelBufSize(level));
}

Deflater::~Deflater() = default;

int Deflater::Compress(std::span<const uint8_t> in, std::vector<uint8_t>& out) {
  if (in.size() > UINT32_MAX) return -EINVAL;
  out.clear();
  out.reserve(in.size() / 2 + 1024);
  isal_zstream& s = state_->stream;
  isal_deflate_init(&s);
  s.level = static_cast<uint32_t>(level_);
  s.level_buf = state_->level_buf.empty() ? nullptr : state_->level_buf.data();
  s.level_buf_size = static_cast<uint32_t>(state_->level_buf.size());
  s.flush = NO_FLUSH;
  s.gzip_flag = IGZIP_DEFLATE;
  s.next_in = const_cast<uint8_t*>(in.data());
  s.avail_in = static_cast<uint32_t>(in.size());
  s.end_of_stream = 1;
  for (;;) {
    // Deflate expands incompressible data by a few bytes per 64 KiB block at most.
    const size_t room = in.size() / 8 + 64 * 1024;
    const size_t old = out.size();
    out.resize(old + room);
    s.next_out = out.data() + old;
    s.avail_out = static_cast<uint32_t>(room);
    const int rc = isal_deflate(&s);
    out.resize(old + (room - s.avail_out));
    if (rc != COMP_OK) return -EINVAL;
    if (s.internal_state.state == ZSTATE_END) return 0;
  }
}

}  // namespace fanstore::compress
