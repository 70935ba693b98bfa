#include "intercept/clone_mark.h"

#include <atomic>

namespace fanstore::intercept {

thread_local uint8_t t_clone_child __attribute__((tls_model("initial-exec"))) = 0;

namespace {
std::atomic<bool> g_complete{false};
}  // namespace

int32_t CloneMarkTlsOffset() {
  return static_cast<int32_t>(reinterpret_cast<intptr_t>(&t_clone_child) -
                              reinterpret_cast<intptr_t>(__builtin_thread_pointer()));
}

bool CloneMarkComplete() {
  return g_complete.load(std::memory_order_relaxed);
}

void SetCloneMarkComplete(bool complete) {
  g_complete.store(complete, std::memory_order_relaxed);
}

}  // namespace fanstore::intercept
