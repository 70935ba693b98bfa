// The MPI calls FanStore makes, as one interface whatever MPI the job brings. Each ABI
// family has a plugin, the same io/mpi_plugin.cc compiled against that family's <mpi.h>:
// libfanstore_mpi_mpich.so (the MPICH ABI, libmpi.so.12: MPICH, Intel MPI, Cray MPICH,
// MVAPICH) and libfanstore_mpi_openmpi.so (Open MPI 4 and 5, libmpi.so.40). fanrun and
// fsbench load one only when a launcher started them (bin/mpi_load.h), so a process alone
// loads no MPI library at all, and one build runs under either family.
// Handles differ between the families (an int in the MPICH ABI, a pointer in Open MPI's),
// so a request is a Request here, translated by the plugin; the one communicator is the
// world's. Messages are bytes (every rank runs the same build on the same architecture).
// Thread-safety: MPI_THREAD_SERIALIZED, as initialised; the callers keep to one thread at
// a time (the agent's thread once it runs, the main thread before).
#pragma once

#include <cstdint>
#include <string>

namespace fanstore::mpi {

// A pending operation; kNoRequest when none (MPI_REQUEST_NULL).
using Request = std::uintptr_t;
inline constexpr Request kNoRequest = 0;
// Irecv from any rank.
inline constexpr int kAnySource = -1;

class Library {
 public:
  virtual ~Library() = default;

  // The library's own one-line description (MPI_Get_library_version), before Init too.
  virtual std::string Version() = 0;
  // MPI_Init_thread asking for MPI_THREAD_SERIALIZED; false if it failed or the library
  // gives less (then it is initialised all the same).
  virtual bool Init(std::string* error) = 0;
  virtual bool Initialized() = 0;
  // From here on the world's errors are returned, not fatal (MPI_ERRORS_RETURN).
  virtual void ReturnErrors() = 0;
  virtual bool Finalized() = 0;
  virtual void Finalize() = 0;

  virtual int Rank() = 0;
  virtual int Size() = 0;
  // This rank's index among the world's ranks on its host (MPI_COMM_TYPE_SHARED); -1 if
  // the library cannot say.
  virtual int HostRank() = 0;
  virtual int TagUpperBound() = 0;

  virtual void Barrier() = 0;
  virtual void Ibarrier(Request* r) = 0;
  virtual void Bcast(void* bytes, int n, int root) = 0;
  // Every rank's `mine` into all[rank].
  virtual void AllgatherInt64(int64_t mine, int64_t* all) = 0;
  // Every rank's counts[rank] bytes at displs[rank] of `all`.
  virtual void Allgatherv(const void* mine, int n, void* all, const int* counts,
                          const int* displs) = 0;
  virtual void AllreduceMinInt64(const int64_t* in, int64_t* out, int n) = 0;
  virtual void ReduceMaxDouble(const double* in, double* out, int n, int root) = 0;
  virtual void ReduceSumDouble(const double* in, double* out, int n, int root) = 0;
  virtual void GatherInt(int mine, int* all, int root) = 0;
  virtual void Gatherv(const void* mine, int n, void* all, const int* counts, const int* displs,
                       int root) = 0;

  virtual void Isend(const void* bytes, int n, int dest, int tag, Request* r) = 0;
  virtual void Irecv(void* bytes, int n, int source, int tag, Request* r) = 0;
  // Each test sets a completed request to kNoRequest, as MPI does.
  virtual bool Test(Request* r) = 0;
  virtual bool Testall(int n, Request* rs) = 0;
  // The indices of the requests that completed (at most n) and who sent each (for
  // receives); returns how many, 0 when none did or every request is kNoRequest.
  virtual int Testsome(int n, Request* rs, int* indices, int* sources) = 0;
  virtual void Wait(Request* r) = 0;
  virtual void Cancel(Request* r) = 0;
  virtual void Free(Request* r) = 0;
};

// The library the process loaded (bin/mpi_load.h sets it once, before any use).
Library& World();
void SetWorld(Library* library);

}  // namespace fanstore::mpi

// The plugin's one exported symbol: the library object for the MPI this plugin was built
// for, which the loader has already made visible (RTLD_GLOBAL). Does not initialise MPI.
extern "C" fanstore::mpi::Library* fanstore_mpi_library();
