// What the launcher that started this process says about it, read from the variables
// launchers set: whether an MPI job can be formed (a PMI or Open MPI's own), srun's tasks
// left without one, the launcher's name, and this process's place on its host. One place
// for fanrun, fanrun doctor and fsbench to ask.
// Thread-safety: reads the environment; call from the main thread.
#pragma once

#include <string>

namespace fanstore::cli {

// Started by an MPI launcher that lets the ranks find each other: PMI_RANK/PMI_SIZE
// (MPICH's Hydra, srun --mpi=pmi2), PMIX_RANK, OMPI_COMM_WORLD_SIZE (Open MPI).
bool LaunchedByMpi();

// One line saying how to fix it when srun started several tasks (SLURM_STEP_ID set,
// SLURM_STEP_NUM_TASKS or SLURM_NTASKS > 1) but gave them no PMI (MpiDefault=none): each
// would run alone. "" otherwise.
std::string SrunWithoutPmi();

// "mpiexec (PMI)", "Open MPI (mpirun)", "srun with PMI", "srun without PMI", "PMIx",
// "a Slurm allocation", or "" when nothing launched this process.
std::string LauncherName();

// This process's rank among its job's processes on this host, as its launcher says
// (MPI_LOCALRANKID, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, PMIX_LOCAL_RANK, torchrun's
// LOCAL_RANK); -1 when none does.
int LauncherLocalRank();

}  // namespace fanstore::cli
