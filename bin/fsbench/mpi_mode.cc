#include "bin/fsbench/mpi_mode.h"

#include <cstdint>
#include <string>

#include "bin/launcher.h"
#include "bin/mpi_load.h"
#include "io/mpi.h"

namespace fanstore::fsbench {

MpiContext MpiStart(int* argc, char*** argv, std::string* error) {
  (void)argc;
  (void)argv;
  MpiContext c;
  if (!cli::LaunchedByMpi()) return c;
  auto loaded = cli::LoadMpi();
  if (!loaded.ok()) {
    *error = "launched by an MPI launcher, but " + loaded.status().message();
    return c;
  }
  if (!mpi::World().Init(error)) return c;
  c.rank = mpi::World().Rank();
  c.size = mpi::World().Size();
  c.active = true;
  return c;
}

void MpiBarrier(const MpiContext& c) {
  if (c.active) mpi::World().Barrier();
}

std::vector<std::string> MpiGather(const MpiContext& c, const std::string& mine) {
  if (!c.active) return {mine};
  const int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<size_t>(c.size)), displs(static_cast<size_t>(c.size));
  mpi::World().GatherInt(len, lens.data(), 0);
  std::string all;
  if (c.rank == 0) {
    int total = 0;
    for (int i = 0; i < c.size; ++i) {
      displs[i] = total;
      total += lens[i];
    }
    all.resize(static_cast<size_t>(total));
  }
  mpi::World().Gatherv(mine.data(), len, all.data(), lens.data(), displs.data(), 0);
  std::vector<std::string> out;
  if (c.rank == 0)
    for (int i = 0; i < c.size; ++i) out.push_back(all.substr(displs[i], lens[i]));
  return out;
}

bool MpiAllOk(const MpiContext& c, bool ok) {
  if (!c.active) return ok;
  const int64_t mine = ok ? 1 : 0;
  int64_t all = 0;
  mpi::World().AllreduceMinInt64(&mine, &all, 1);
  return all == 1;
}

void MpiStop(const MpiContext& c) {
  if (c.active) mpi::World().Finalize();
}

}  // namespace fanstore::fsbench
