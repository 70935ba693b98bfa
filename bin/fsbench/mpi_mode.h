// MPI mode: fsbench uses MPI only when it was started by an MPI launcher (mpiexec sets
// PMI_RANK/PMI_SIZE for MPICH's Hydra, OMPI_COMM_WORLD_SIZE for Open MPI); otherwise it
// never calls MPI_Init and runs alone.
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

bool LaunchedByMpi();
MpiContext MpiStart(int* argc, char*** argv);
void MpiBarrier(const MpiContext& c);
// Gathers every rank's bytes at rank 0 (result empty elsewhere).
std::vector<std::string> MpiGather(const MpiContext& c, const std::string& mine);
// Rank 0's value of `ok` broadcast; any rank false makes all false.
bool MpiAllOk(const MpiContext& c, bool ok);
void MpiStop(const MpiContext& c);

}  // namespace fanstore::fsbench
