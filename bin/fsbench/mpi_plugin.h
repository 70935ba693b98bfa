// The boundary between fsbench and its MPI plugin (libfsbench_mpi.so). The plugin is
// built against, and linked with, whatever MPI the build found (MPICH, Open MPI, any
// MPICH-ABI library), so its handles and library match; fsbench loads it only when an MPI
// launcher started it (mpi_mode.h). Both sides are built by the same compiler in one
// build, so the interface is a C++ class.
// Thread-safety: used from fsbench's main thread only.
#pragma once

#include <string>
#include <vector>

namespace fanstore::fsbench {

class MpiPlugin {
 public:
  virtual ~MpiPlugin() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void Barrier() = 0;
  // Every rank's bytes at rank 0 (empty elsewhere).
  virtual std::vector<std::string> Gather(const std::string& mine) = 0;
  // True only if `ok` is true on every rank.
  virtual bool AllOk(bool ok) = 0;
  virtual void Finalize() = 0;
};

}  // namespace fanstore::fsbench

// Initializes MPI (MPI_THREAD_FUNNELED) and returns the plugin; the one exported symbol.
extern "C" fanstore::fsbench::MpiPlugin* fanstore_fsbench_mpi_start(int* argc, char*** argv);
