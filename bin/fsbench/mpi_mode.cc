#include "bin/fsbench/mpi_mode.h"

#include <dlfcn.h>
#include <mpi.h>

#include <cstdlib>

namespace fanstore::fsbench {
namespace {

// The MPI functions fsbench calls, resolved from MPICH at run time. MPICH's handles
// (MPI_COMM_WORLD, MPI_INT, ...) are compile-time constants, so only functions are needed.
struct MpiApi {
  decltype(&MPI_Init_thread) init_thread;
  decltype(&MPI_Comm_rank) comm_rank;
  decltype(&MPI_Comm_size) comm_size;
  decltype(&MPI_Barrier) barrier;
  decltype(&MPI_Gather) gather;
  decltype(&MPI_Gatherv) gatherv;
  decltype(&MPI_Allreduce) allreduce;
  decltype(&MPI_Finalize) finalize;
} g_mpi;

bool LoadMpi(std::string* error) {
  void* h = nullptr;
  for (const char* name : {"libmpich.so.12", "libmpi.so.12", "libmpich.so"})
    if ((h = ::dlopen(name, RTLD_NOW | RTLD_GLOBAL))) break;
  if (!h) {
    *error = "launched by mpiexec, but MPICH (libmpich.so.12) cannot be loaded";
    return false;
  }
  bool ok = true;
  auto sym = [&](auto& fn, const char* n) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(h, n));
    ok = ok && fn;
  };
  sym(g_mpi.init_thread, "MPI_Init_thread");
  sym(g_mpi.comm_rank, "MPI_Comm_rank");
  sym(g_mpi.comm_size, "MPI_Comm_size");
  sym(g_mpi.barrier, "MPI_Barrier");
  sym(g_mpi.gather, "MPI_Gather");
  sym(g_mpi.gatherv, "MPI_Gatherv");
  sym(g_mpi.allreduce, "MPI_Allreduce");
  sym(g_mpi.finalize, "MPI_Finalize");
  if (!ok) *error = "the loaded MPI library lacks an MPI function fsbench needs";
  return ok;
}

}  // namespace

bool LaunchedByMpi() {
  for (const char* v : {"PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE"})
    if (std::getenv(v)) return true;
  return false;
}

MpiContext MpiStart(int* argc, char*** argv, std::string* error) {
  MpiContext c;
  if (!LaunchedByMpi() || !LoadMpi(error)) return c;
  int provided = 0;
  g_mpi.init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  g_mpi.comm_rank(MPI_COMM_WORLD, &c.rank);
  g_mpi.comm_size(MPI_COMM_WORLD, &c.size);
  c.active = true;
  return c;
}

void MpiBarrier(const MpiContext& c) {
  if (c.active) g_mpi.barrier(MPI_COMM_WORLD);
}

std::vector<std::string> MpiGather(const MpiContext& c, const std::string& mine) {
  if (!c.active) return {mine};
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(c.size), displs(c.size);
  g_mpi.gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::string all;
  if (c.rank == 0) {
    int total = 0;
    for (int i = 0; i < c.size; ++i) {
      displs[i] = total;
      total += lens[i];
    }
    all.resize(static_cast<size_t>(total));
  }
  g_mpi.gatherv(mine.data(), len, MPI_BYTE, all.data(), lens.data(), displs.data(), MPI_BYTE, 0,
                MPI_COMM_WORLD);
  std::vector<std::string> out;
  if (c.rank == 0)
    for (int i = 0; i < c.size; ++i) out.push_back(all.substr(displs[i], lens[i]));
  return out;
}

bool MpiAllOk(const MpiContext& c, bool ok) {
  if (!c.active) return ok;
  int mine = ok ? 1 : 0, all = 0;
  g_mpi.allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

void MpiStop(const MpiContext& c) {
  if (c.active) g_mpi.finalize();
}

}  // namespace fanstore::fsbench
