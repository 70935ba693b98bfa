#include "bin/fsbench/mpi_mode.h"

#include <dlfcn.h>
#include <limits.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "bin/fsbench/mpi_plugin.h"

namespace fanstore::fsbench {
namespace {

MpiPlugin* g_mpi = nullptr;

// libfsbench_mpi.so: $FANSTORE_FSBENCH_MPI, else beside fsbench (the build tree), else in
// the installed library directories.
void* OpenPlugin(std::string* tried) {
  std::vector<std::string> candidates;
  if (const char* p = std::getenv("FANSTORE_FSBENCH_MPI"); p && *p) candidates.push_back(p);
  char exe[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    std::string dir(exe, static_cast<size_t>(n));
    dir = dir.substr(0, dir.rfind('/'));
    for (const char* rel : {"/", "/../lib/", "/../lib/x86_64-linux-gnu/", "/../lib64/"})
      candidates.push_back(dir + rel + "libfsbench_mpi.so");
  }
  for (const std::string& c : candidates) {
    // RTLD_GLOBAL: Open MPI's own components resolve libmpi's symbols through it.
    if (void* h = ::dlopen(c.c_str(), RTLD_NOW | RTLD_GLOBAL)) return h;
    if (::access(c.c_str(), F_OK) == 0) *tried = c + ": " + ::dlerror();
  }
  if (tried->empty()) *tried = "libfsbench_mpi.so is not beside fsbench or in its lib directory";
  return nullptr;
}

}  // namespace

bool LaunchedByMpi() {
  for (const char* v : {"PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE"})
    if (std::getenv(v)) return true;
  return false;
}

MpiContext MpiStart(int* argc, char*** argv, std::string* error) {
  MpiContext c;
  if (!LaunchedByMpi()) return c;
  std::string why;
  void* h = OpenPlugin(&why);
  using StartFn = MpiPlugin* (*)(int*, char***);
  auto start = h ? reinterpret_cast<StartFn>(::dlsym(h, "fanstore_fsbench_mpi_start")) : nullptr;
  if (!start) {
    *error = "launched by an MPI launcher, but the MPI plugin cannot be loaded: " +
             (h ? std::string("it lacks fanstore_fsbench_mpi_start") : why);
    return c;
  }
  g_mpi = start(argc, argv);
  if (!g_mpi) {
    *error = "MPI_Init_thread failed";
    return c;
  }
  c.rank = g_mpi->rank();
  c.size = g_mpi->size();
  c.active = true;
  return c;
}

void MpiBarrier(const MpiContext& c) {
  if (c.active) g_mpi->Barrier();
}

std::vector<std::string> MpiGather(const MpiContext& c, const std::string& mine) {
  if (!c.active) return {mine};
  return g_mpi->Gather(mine);
}

bool MpiAllOk(const MpiContext& c, bool ok) {
  return c.active ? g_mpi->AllOk(ok) : ok;
}

void MpiStop(const MpiContext& c) {
  if (c.active) g_mpi->Finalize();
}

}  // namespace fanstore::fsbench
