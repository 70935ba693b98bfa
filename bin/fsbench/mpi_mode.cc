#include "bin/fsbench/mpi_mode.h"

#include <mpi.h>

#include <cstdlib>

namespace fanstore::fsbench {

bool LaunchedByMpi() {
  for (const char* v : {"PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE"})
    if (std::getenv(v)) return true;
  return false;
}

MpiContext MpiStart(int* argc, char*** argv) {
  MpiContext c;
  if (!LaunchedByMpi()) return c;
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &c.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &c.size);
  c.active = true;
  return c;
}

void MpiBarrier(const MpiContext& c) {
  if (c.active) MPI_Barrier(MPI_COMM_WORLD);
}

std::vector<std::string> MpiGather(const MpiContext& c, const std::string& mine) {
  if (!c.active) return {mine};
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(c.size), displs(c.size);
  MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::string all;
  if (c.rank == 0) {
    int total = 0;
    for (int i = 0; i < c.size; ++i) {
      displs[i] = total;
      total += lens[i];
    }
    all.resize(static_cast<size_t>(total));
  }
  MPI_Gatherv(mine.data(), len, MPI_BYTE, all.data(), lens.data(), displs.data(), MPI_BYTE, 0,
              MPI_COMM_WORLD);
  std::vector<std::string> out;
  if (c.rank == 0)
    for (int i = 0; i < c.size; ++i) out.push_back(all.substr(displs[i], lens[i]));
  return out;
}

bool MpiAllOk(const MpiContext& c, bool ok) {
  if (!c.active) return ok;
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

void MpiStop(const MpiContext& c) {
  if (c.active) MPI_Finalize();
}

}  // namespace fanstore::fsbench
