#include "intercept/clone_mark.h"

#include <atomic>

namespace fanstore::intercept {

constinit thread_local uint8_t t_clone_child __attribute__((tls_model("initial-exec"))) = 0;

namespace {
std::atomic<bool> g_complete{false};
}  // namespace

int32_t CloneMarkTlsOffset() {
  // The thread pointer comes from an asm the compiler cannot see through: otherwise gcc
  // folds `&t - tp` into a 32-bit load of the GOT's TLS offset (movl sym@gottpoff(%rip),
  // %eax), which binutils 2.44 and later reject ("@GOTTPOFF operator requires 64-bit dest
  // register"). x86-64's TCB starts with a pointer to itself, so %fs:0 is the pointer;
  // aarch64's is tpidr_el0.
  intptr_t tp;
#if defined(__x86_64__)
  asm volatile("movq %%fs:0, %0" : "=r"(tp));
#else
  asm volatile("mrs %0, tpidr_el0" : "=r"(tp));
#endif
  return static_cast<int32_t>(reinterpret_cast<intptr_t>(&t_clone_child) - tp);
}

bool CloneMarkComplete() {
  return g_complete.load(std::memory_order_relaxed);
}

void SetCloneMarkComplete(bool complete) {
  g_complete.store(complete, std::memory_order_relaxed);
}

}  // namespace fanstore::intercept
