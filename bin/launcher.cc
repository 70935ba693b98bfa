#include "bin/launcher.h"

#include <cstdlib>

namespace fanstore::cli {
namespace {

bool Has(const char* name) {
  return std::getenv(name) != nullptr;
}

}  // namespace

bool LaunchedByMpi() {
  return Has("PMI_RANK") || Has("PMI_SIZE") || Has("PMIX_RANK") || Has("OMPI_COMM_WORLD_SIZE");
}

std::string SrunWithoutPmi() {
  if (LaunchedByMpi() || !Has("SLURM_STEP_ID")) return "";
  const char* n = std::getenv("SLURM_STEP_NUM_TASKS");
  if (!n) n = std::getenv("SLURM_NTASKS");
  if (!n || std::atol(n) <= 1) return "";
  return "srun started " + std::string(n) +
         " tasks without a PMI, so they cannot form one job: run srun --mpi=pmi2 (or set "
         "MpiDefault=pmi2 in slurm.conf)";
}

std::string LauncherName() {
  if (Has("OMPI_COMM_WORLD_SIZE")) return "Open MPI (mpirun)";
  if (Has("PMI_RANK") || Has("PMI_SIZE"))
    return Has("SLURM_JOB_ID") ? "srun with PMI" : "mpiexec (PMI)";
  if (Has("PMIX_RANK")) return "PMIx";
  if (Has("SLURM_JOB_ID")) return Has("SLURM_STEP_ID") ? "srun without PMI" : "a Slurm allocation";
  return "";
}

int LauncherLocalRank() {
  for (const char* v : {"MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                        "PMIX_LOCAL_RANK", "LOCAL_RANK"})
    if (const char* s = std::getenv(v); s && *s) return std::atoi(s);
  return -1;
}

}  // namespace fanstore::cli
