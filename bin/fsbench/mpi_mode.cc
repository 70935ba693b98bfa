#include "bin/fsbench/mpi_mode.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include "base/env_names.h"
#include "bin/cli_util.h"
#include "bin/fsbench/mpi_plugin.h"
#include "bin/launcher.h"

namespace fanstore::fsbench {
namespace {

MpiPlugin* g_mpi = nullptr;

// libfsbench_mpi.so: $FANSTORE_FSBENCH_MPI, else beside fsbench (the build tree), else in
// the installed library directories.
void* OpenPlugin(std::string* why) {
  std::string path;
  if (const char* p = std::getenv(fanstore::env::kFsbenchMpi); p && *p) path = p;
  if (path.empty())
    path = cli::FindBesideExecutable({"libfsbench_mpi.so", "../lib/libfsbench_mpi.so",
                                      "../lib/x86_64-linux-gnu/libfsbench_mpi.so",
                                      "../lib64/libfsbench_mpi.so"});
  if (path.empty()) {
    *why = "libfsbench_mpi.so is not beside fsbench or in its lib directory";
    return nullptr;
  }
  // RTLD_GLOBAL: Open MPI's own components resolve libmpi's symbols through it.
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!h) *why = ::dlerror();
  return h;
}

}  // namespace

MpiContext MpiStart(int* argc, char*** argv, std::string* error) {
  MpiContext c;
  if (!cli::LaunchedByMpi()) return c;
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
