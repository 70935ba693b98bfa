#include "bin/node_memory.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

namespace fanstore::fanrun {

uint64_t MemAvailable() {
  FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char line[256];
  unsigned long long kb = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
  std::fclose(f);
  return static_cast<uint64_t>(kb) * 1024;
}

// What this process's memory cgroups still allow it to use: the tightest of its own and its
// ancestors' limit less their usage (v2: memory.max, memory.current; v1: the memory
// controller's limit_in_bytes, usage_in_bytes), or UINT64_MAX where none is set or readable.
// Under Slurm a job's limit is far below the node's MemAvailable, and a copy to /dev/shm is
// charged to the job.
uint64_t CgroupRoom() {
  std::string v2, v1;
  if (FILE* f = std::fopen("/proc/self/cgroup", "r")) {
    char line[4096];
    while (std::fgets(line, sizeof line, f)) {
      std::string l(line, std::strcspn(line, "\n"));
      const size_t a = l.find(':'), b = a == std::string::npos ? a : l.find(':', a + 1);
      if (b == std::string::npos) continue;
      const std::string controllers = l.substr(a + 1, b - a - 1);
      if (l.compare(0, a, "0") == 0 && controllers.empty()) v2 = l.substr(b + 1);
      if (("," + controllers + ",").find(",memory,") != std::string::npos) v1 = l.substr(b + 1);
    }
    std::fclose(f);
  }
  auto number = [](const std::string& path, uint64_t* v) {
    FILE* f = std::fopen(path.c_str(), "r");
    if (!f) return false;
    unsigned long long n = 0;
    const bool got = std::fscanf(f, "%llu", &n) == 1;  // ("max" is no number: no limit)
    std::fclose(f);
    *v = n;
    return got;
  };
  uint64_t room = UINT64_MAX;
  auto walk = [&](const std::string& base, const std::string& rel, const char* max_name,
                  const char* used_name) {
    for (std::string dir = rel; dir.size() > 1;
         dir = dir.substr(0, std::max<size_t>(dir.rfind('/'), 1))) {
      uint64_t max = 0, used = 0;
      // (v1 writes "no limit" as a number near 2^63)
      if (number(base + dir + "/" + max_name, &max) && max < (uint64_t{1} << 60) &&
          number(base + dir + "/" + used_name, &used))
        room = std::min(room, max > used ? max - used : 0);
    }
  };
  walk("/sys/fs/cgroup", v2, "memory.max", "memory.current");
  walk("/sys/fs/cgroup/memory", v1, "memory.limit_in_bytes", "memory.usage_in_bytes");
  return room;
}

uint64_t MemoryForCopies() {
  return std::min(MemAvailable(), CgroupRoom());
}

}  // namespace fanstore::fanrun
