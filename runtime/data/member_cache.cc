#include <atomic>
#include <mutex>  // std::lock_guard

#include "runtime/data/member_io_parts.h"

namespace fanstore::runtime {
namespace {

constexpr int kCacheSlots = 16;
// The cache's bytes at most (beyond the member just put): a large compressed member is
// held whole for its partial reads, and 16 of them must not take the node's memory.
constexpr uint64_t kCacheBytes = 256ull << 20;

// A spinlock, not a pthread mutex: the hook runs inside arbitrary applications (under
// ThreadSanitizer too, which intercepts pthread locks it did not see initialised), and the
// critical sections are a scan of 16 slots with no allocation or system call.
class SpinLock {
 public:
  void lock() {
    while (flag_.test_and_set(std::memory_order_acquire)) {
#if defined(__x86_64__)
      __builtin_ia32_pause();
#elif defined(__aarch64__)
      asm volatile("yield");
#endif
    }
  }
  void unlock() {
    flag_.clear(std::memory_order_release);
  }

 private:
  std::atomic_flag flag_ = ATOMIC_FLAG_INIT;
};

constexpr uint64_t kNoKey = ~uint64_t{0};

struct Cache {
  SpinLock mu;
  struct Slot {
    uint64_t key = kNoKey;
    uint64_t tick = 0;
    std::shared_ptr<Bytes> data;
  } slots[kCacheSlots];
  uint64_t tick = 0;

  std::shared_ptr<Bytes> Find(uint64_t key) {
    std::lock_guard<SpinLock> lk(mu);
    for (auto& sl : slots)
      if (sl.key == key) {
        sl.tick = ++tick;
        return sl.data;
      }
    return nullptr;
  }
  void Put(uint64_t key, std::shared_ptr<Bytes> d) {
    std::shared_ptr<Bytes> evicted[kCacheSlots];  // released after the lock
    int n_evicted = 0;
    std::lock_guard<SpinLock> lk(mu);
    Slot* victim = &slots[0];
    for (auto& sl : slots)
      if (sl.tick < victim->tick) victim = &sl;
    bytes -= victim->data ? victim->data->size() : 0;
    bytes += d->size();
    victim->key = key;
    victim->tick = ++tick;
    evicted[n_evicted++] = std::move(victim->data);
    victim->data = std::move(d);
    // Then the least recently used others, while over the byte bound.
    while (bytes > victim->data->size() + kCacheBytes) {
      Slot* old = nullptr;
      for (auto& sl : slots)
        if (sl.data && &sl != victim && (!old || sl.tick < old->tick)) old = &sl;
      if (!old) break;
      bytes -= old->data->size();
      old->key = kNoKey;
      evicted[n_evicted++] = std::move(old->data);
    }
  }
  uint64_t bytes = 0;  // held in the slots
};
Cache& TheCache() {
  static Cache* c = new Cache();
  return *c;
}

}  // namespace

std::shared_ptr<Bytes> CacheFind(uint64_t key) {
  return TheCache().Find(key);
}

void CachePut(uint64_t key, std::shared_ptr<Bytes> bytes) {
  TheCache().Put(key, std::move(bytes));
}

std::shared_ptr<Bytes> NewBuffer(uint64_t n) {
  try {  // the hook runs inside the application: no exception may leave it
    return std::make_shared<Bytes>(n);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}

}  // namespace fanstore::runtime
