// Chooses and loads the job's MPI at run time (io/mpi.h): the MPI library the launcher's
// environment brings, then the FanStore plugin of its ABI family, found beside the program
// (../lib, or the build tree). Which family: FANSTORE_MPI when set (mpich, openmpi, or the
// path of an MPI library), else the launcher's hint (Open MPI's OMPI_* variables: openmpi;
// Hydra's or srun's PMI_*: mpich), then whichever family's library loads, in the order
// mpich, openmpi. A library loads by its soname through the usual search (LD_LIBRARY_PATH,
// as a cluster's MPI module sets it, then the system's), RTLD_GLOBAL: Open MPI's own
// components resolve libmpi's symbols through it.
// Thread-safety: call from the main thread, once, before any other thread uses MPI.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "io/mpi.h"

namespace fanstore::cli {

struct MpiChoice {
  std::string family;   // "mpich" or "openmpi"
  std::string library;  // the MPI library's path, as loaded
  std::string plugin;   // the plugin's path
  mpi::Library* mpi = nullptr;
  // What was tried before, one line each ("openmpi: libmpi.so.40: cannot open ...").
  std::vector<std::string> tried;
};

// Loads the MPI and its plugin and makes it the process's (mpi::SetWorld); does not
// initialise MPI. The error names what was tried.
Result<MpiChoice> LoadMpi();

}  // namespace fanstore::cli
