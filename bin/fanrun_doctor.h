// `fanrun doctor`: what stands between this machine and a FanStore job, checked before
// anything runs. It plans libc's syscall sites (the running libc, or any libc file with
// --libc) exactly as the runtime would, and looks at the kernel's io_uring, /dev/shm, a
// --local-dir, the MPI library and launcher, and a dataset. One report, human-readable or
// JSON, with one line per problem saying what to do. Changes nothing.
// Thread-safety: single-threaded tool code.
#pragma once

#include <string>

namespace fanstore::fanrun {

struct DoctorOptions {
  std::string libc;       // a libc file to plan instead of the running one
  std::string data;       // a packed dataset to look at
  std::string local_dir;  // where --local-dir would stage
  std::string preload;    // the runtime library fanrun would preload ("" = not found)
  bool json = false;
};

// Prints the report on stdout. Returns 0 when no problem was found, 1 otherwise, and 2
// when --libc names no readable x86-64 ELF file.
int Doctor(const DoctorOptions& opt);

}  // namespace fanstore::fanrun
