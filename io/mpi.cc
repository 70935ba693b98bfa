#include "io/mpi.h"

#include <cstdio>
#include <cstdlib>

namespace fanstore::mpi {
namespace {
Library* g_world = nullptr;
}  // namespace

Library& World() {
  if (!g_world) {  // a programming error: MPI used before bin/mpi_load.h chose it
    std::fputs("fanstore: MPI used before it was loaded\n", stderr);
    std::abort();
  }
  return *g_world;
}

void SetWorld(Library* library) {
  g_world = library;
}

}  // namespace fanstore::mpi
