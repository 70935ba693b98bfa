// MPI mode: fsbench uses MPI only when an MPI launcher started it (cli::LaunchedByMpi:
// MPICH's Hydra, srun --mpi=pmi2, PMIx, Open MPI); otherwise it never loads MPI and runs
// alone. Then it loads the launcher's MPI and FanStore's plugin for it (bin/mpi_load.h), so
// fsbench needs no MPI installed to run natively (and MPI's memory hooks, UCX's, stay out
// of processes that do not use them), and works with MPICH and Open MPI alike.
// Thread-safety: call from the main thread only.
#pragma once

#include <string>
#include <vector>

namespace fanstore::fsbench {

struct MpiContext {
  bool active = false;
  int rank = 0;
  int size = 1;
};

// Starts MPI when launched by mpiexec. Fails (with `error`) only if MPI was wanted and
// could not be loaded.
MpiContext MpiStart(int* argc, char*** argv, std::string* error);
void MpiBarrier(const MpiContext& c);
// Gathers every rank's bytes at rank 0 (result empty elsewhere).
std::vector<std::string> MpiGather(const MpiContext& c, const std::string& mine);
// Rank 0's value of `ok` broadcast; any rank false makes all false.
bool MpiAllOk(const MpiContext& c, bool ok);
void MpiStop(const MpiContext& c);

}  // namespace fanstore::fsbench
