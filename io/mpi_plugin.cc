// The MPI plugin (io/mpi.h): compiled once per ABI family against that family's <mpi.h>,
// as libfanstore_mpi_<family>.so. It holds no state of its own but the translation of
// requests: a Request is the MPI_Request's bits, kNoRequest standing for MPI_REQUEST_NULL
// (which is not 0 in either family).
#include <mpi.h>

#include <cstring>
#include <vector>

#include "io/mpi.h"

namespace fanstore::mpi {
namespace {

static_assert(sizeof(MPI_Request) <= sizeof(Request), "an MPI_Request fits a Request");

MPI_Request Native(Request r) {
  if (r == kNoRequest) return MPI_REQUEST_NULL;
  MPI_Request n;
  std::memcpy(&n, &r, sizeof n);
  return n;
}

Request Ours(MPI_Request n) {
  if (n == MPI_REQUEST_NULL) return kNoRequest;
  Request r = 0;
  std::memcpy(&r, &n, sizeof n);
  return r;
}

class Plugin final : public Library {
 public:
  std::string Version() override {
    char v[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int len = 0;
    MPI_Get_library_version(v, &len);  // allowed before MPI_Init (MPI 3.0)
    return std::string(v, static_cast<size_t>(len > 0 ? len : 0));
  }

  bool Init(std::string* error) override {
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
      *error = "MPI_Init_thread failed";
      return false;
    }
    if (provided < MPI_THREAD_SERIALIZED) {
      *error = "the MPI library does not support MPI_THREAD_SERIALIZED";
      return false;
    }
    return true;
  }

  void ReturnErrors() override { MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN); }

  bool Initialized() override {
    int done = 0;
    MPI_Initialized(&done);
    return done != 0;
  }

  bool Finalized() override {
    int done = 0;
    MPI_Finalized(&done);
    return done != 0;
  }
  void Finalize() override { MPI_Finalize(); }

  int Rank() override {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
  }
  int Size() override {
    int n = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
  }
  int HostRank() override {
    MPI_Comm host;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host) !=
        MPI_SUCCESS)
      return -1;
    int r = -1;
    MPI_Comm_rank(host, &r);
    MPI_Comm_free(&host);
    return r;
  }
  int TagUpperBound() override {
    int* ub = nullptr;
    int flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    return flag && ub ? *ub : 32767;  // (the least the standard allows)
  }

  void Barrier() override { MPI_Barrier(MPI_COMM_WORLD); }
  void Ibarrier(Request* r) override {
    MPI_Request n;
    MPI_Ibarrier(MPI_COMM_WORLD, &n);
    *r = Ours(n);
  }
  void Bcast(void* bytes, int n, int root) override {
    MPI_Bcast(bytes, n, MPI_BYTE, root, MPI_COMM_WORLD);
  }
  void AllgatherInt64(int64_t mine, int64_t* all) override {
    MPI_Allgather(&mine, 1, MPI_INT64_T, all, 1, MPI_INT64_T, MPI_COMM_WORLD);
  }
  void Allgatherv(const void* mine, int n, void* all, const int* counts,
                  const int* displs) override {
    MPI_Allgatherv(mine, n, MPI_BYTE, all, counts, displs, MPI_BYTE, MPI_COMM_WORLD);
  }
  void AllreduceMinInt64(const int64_t* in, int64_t* out, int n) override {
    MPI_Allreduce(in, out, n, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD);
  }
  void ReduceMaxDouble(const double* in, double* out, int n, int root) override {
    MPI_Reduce(in, out, n, MPI_DOUBLE, MPI_MAX, root, MPI_COMM_WORLD);
  }
  void ReduceSumDouble(const double* in, double* out, int n, int root) override {
    MPI_Reduce(in, out, n, MPI_DOUBLE, MPI_SUM, root, MPI_COMM_WORLD);
  }
  void GatherInt(int mine, int* all, int root) override {
    MPI_Gather(&mine, 1, MPI_INT, all, 1, MPI_INT, root, MPI_COMM_WORLD);
  }
  void Gatherv(const void* mine, int n, void* all, const int* counts, const int* displs,
               int root) override {
    MPI_Gatherv(mine, n, MPI_BYTE, all, counts, displs, MPI_BYTE, root, MPI_COMM_WORLD);
  }

  void Isend(const void* bytes, int n, int dest, int tag, Request* r) override {
    MPI_Request q;
    MPI_Isend(bytes, n, MPI_BYTE, dest, tag, MPI_COMM_WORLD, &q);
    *r = Ours(q);
  }
  void Irecv(void* bytes, int n, int source, int tag, Request* r) override {
    MPI_Request q;
    MPI_Irecv(bytes, n, MPI_BYTE, source == kAnySource ? MPI_ANY_SOURCE : source, tag,
              MPI_COMM_WORLD, &q);
    *r = Ours(q);
  }
  bool Test(Request* r) override {
    MPI_Request q = Native(*r);
    int done = 0;
    MPI_Test(&q, &done, MPI_STATUS_IGNORE);
    *r = Ours(q);
    return done != 0;
  }
  bool Testall(int n, Request* rs) override {
    Load(n, rs);
    int done = 0;
    MPI_Testall(n, natives_.data(), &done, MPI_STATUSES_IGNORE);
    Store(n, rs);
    return done != 0;
  }
  int Testsome(int n, Request* rs, int* indices, int* sources) override {
    Load(n, rs);
    statuses_.resize(static_cast<size_t>(n));
    int count = 0;
    MPI_Testsome(n, natives_.data(), &count, indices, statuses_.data());
    Store(n, rs);
    if (count == MPI_UNDEFINED || count < 0) return 0;
    for (int i = 0; i < count; ++i) sources[i] = statuses_[i].MPI_SOURCE;
    return count;
  }
  void Wait(Request* r) override {
    MPI_Request q = Native(*r);
    MPI_Wait(&q, MPI_STATUS_IGNORE);
    *r = Ours(q);
  }
  void Cancel(Request* r) override {
    MPI_Request q = Native(*r);
    if (q != MPI_REQUEST_NULL) MPI_Cancel(&q);
  }
  void Free(Request* r) override {
    MPI_Request q = Native(*r);
    if (q != MPI_REQUEST_NULL) MPI_Request_free(&q);
    *r = kNoRequest;
  }

 private:
  // The native arrays the array tests take, reused (one thread at a time: io/mpi.h).
  void Load(int n, const Request* rs) {
    natives_.resize(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) natives_[i] = Native(rs[i]);
  }
  void Store(int n, Request* rs) {
    for (int i = 0; i < n; ++i) rs[i] = Ours(natives_[i]);
  }
  std::vector<MPI_Request> natives_;
  std::vector<MPI_Status> statuses_;
};

}  // namespace
}  // namespace fanstore::mpi

extern "C" __attribute__((visibility("default"))) fanstore::mpi::Library* fanstore_mpi_library() {
  static fanstore::mpi::Plugin plugin;
  return &plugin;
}
