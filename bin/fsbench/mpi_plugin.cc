#include "bin/fsbench/mpi_plugin.h"

#include <mpi.h>

namespace fanstore::fsbench {
namespace {

class Plugin final : public MpiPlugin {
 public:
  Plugin() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void Barrier() override { MPI_Barrier(MPI_COMM_WORLD); }

  std::vector<std::string> Gather(const std::string& mine) override {
    int len = static_cast<int>(mine.size());
    std::vector<int> lens(static_cast<size_t>(size_)), displs(static_cast<size_t>(size_));
    MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
    std::string all;
    if (rank_ == 0) {
      int total = 0;
      for (int i = 0; i < size_; ++i) {
        displs[i] = total;
        total += lens[i];
      }
      all.resize(static_cast<size_t>(total));
    }
    MPI_Gatherv(mine.data(), len, MPI_BYTE, all.data(), lens.data(), displs.data(), MPI_BYTE, 0,
                MPI_COMM_WORLD);
    std::vector<std::string> out;
    if (rank_ == 0)
      for (int i = 0; i < size_; ++i) out.push_back(all.substr(displs[i], lens[i]));
    return out;
  }

  bool AllOk(bool ok) override {
    int mine = ok ? 1 : 0, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all == 1;
  }

  void Finalize() override { MPI_Finalize(); }

 private:
  int rank_ = 0, size_ = 1;
};

}  // namespace
}  // namespace fanstore::fsbench

extern "C" __attribute__((visibility("default"))) fanstore::fsbench::MpiPlugin*
fanstore_fsbench_mpi_start(int* argc, char*** argv) {
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) return nullptr;
  return new fanstore::fsbench::Plugin();
}
