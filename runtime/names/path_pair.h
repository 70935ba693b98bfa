// A pair of paths remembered for the process's life (a spelling and the kernel's physical
// name for it: runtime/paths/dot_dot.cc's ".." heads, runtime/paths/skeleton.h's learned links),
// written in place once and read without locks: a vfork child may add one (no
// allocation), and the prefilter reads them (general registers only).
// Thread-safety: the state goes 0 (free) -> 1 (claimed by one writer) -> 2 (published);
// the writer's release store of 2 after filling the slot pairs with a reader's acquire
// load, so a reader that sees 2 sees the bytes. A slot never changes after that.
#pragma once

#include <atomic>
#include <cstring>
#include <string_view>

namespace fanstore::runtime {

template <size_t KeyRoom, size_t ValueRoom>
struct PathPair {
  std::atomic<int> state{0};
  unsigned key_len = 0, value_len = 0;
  char key[KeyRoom] = {}, value[ValueRoom] = {};

  bool Published() const { return state.load(std::memory_order_acquire) == 2; }
  bool Free() const { return state.load(std::memory_order_acquire) == 0; }
  std::string_view Key() const { return {key, key_len}; }
  std::string_view Value() const { return {value, value_len}; }

  static bool Fits(std::string_view k, std::string_view v) {
    return k.size() < KeyRoom && v.size() < ValueRoom;
  }
  // Claims this slot if it is free and fills it (NUL-terminated): true if it did.
  bool TryFill(std::string_view k, std::string_view v) {
    int expected = 0;
    if (!Fits(k, v) || !state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel))
      return false;
    std::memcpy(key, k.data(), k.size());
    key[k.size()] = 0;
    key_len = static_cast<unsigned>(k.size());
    std::memcpy(value, v.data(), v.size());
    value[v.size()] = 0;
    value_len = static_cast<unsigned>(v.size());
    state.store(2, std::memory_order_release);
    return true;
  }
};

}  // namespace fanstore::runtime
