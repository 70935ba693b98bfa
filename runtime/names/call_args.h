// Where a system call takes its paths and fds, as runtime/names/call_table.h and
// runtime/names/unserved_calls.h write their rows: Path(p), PathAt(d, p), Paths(x, y), Fd(i).
// Thread-safety: constant data and pure functions.
#pragma once

#include <cstdint>

namespace fanstore::runtime {

struct PathArgs {
  int8_t dirfd[2] = {-1, -1};  // -1: AT_FDCWD
  int8_t path[2] = {-1, -1};   // -1: no such pair
};
inline constexpr PathArgs kNoPath{};
constexpr PathArgs Path(int p) {
  return {{-1, -1}, {static_cast<int8_t>(p), -1}};
}
constexpr PathArgs PathAt(int d, int p) {
  return {{static_cast<int8_t>(d), -1}, {static_cast<int8_t>(p), -1}};
}
constexpr PathArgs Paths(PathArgs x, PathArgs y) {
  return {{x.dirfd[0], y.dirfd[0]}, {x.path[0], y.path[0]}};
}
constexpr uint8_t Fd(int i) {
  return static_cast<uint8_t>(1u << i);
}
constexpr uint8_t Fd(int i, int j) {
  return static_cast<uint8_t>(Fd(i) | Fd(j));
}

}  // namespace fanstore::runtime
