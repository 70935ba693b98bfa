// An MPI application for the attach-mode test: every rank reads every file named in LIST
// below MOUNT (through the runtime) and compares it byte for byte with the same file below
// NATIVE. Rank 0 prints "files=N mismatches=M" summed over ranks; exit 0 iff M == 0.
// Usage: mpi_reader MOUNT NATIVE LIST
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long ReadAll(const char* path, char** out) {
  FILE* f = fopen(path, "rb");
  if (!f) return -1;
  size_t cap = 1 << 16, n = 0;
  char* buf = malloc(cap);
  for (;;) {
    if (n == cap) buf = realloc(buf, cap *= 2);
    const size_t got = fread(buf + n, 1, cap - n, f);
    if (got == 0) break;
    n += got;
  }
  const int err = ferror(f);
  fclose(f);
  if (err) {
    free(buf);
    return -1;
  }
  *out = buf;
  return (long)n;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc != 4) {
    if (rank == 0) fprintf(stderr, "usage: mpi_reader MOUNT NATIVE LIST\n");
    MPI_Finalize();
    return 2;
  }
  FILE* list = fopen(argv[3], "r");
  long files = 0, mismatches = 0;
  char rel[4096];
  while (list && fgets(rel, sizeof rel, list)) {
    rel[strcspn(rel, "\n")] = 0;
    char a[8192], b[8192];
    snprintf(a, sizeof a, "%s/%s", argv[1], rel);
    snprintf(b, sizeof b, "%s/%s", argv[2], rel);
    char *x = NULL, *y = NULL;
    const long nx = ReadAll(a, &x), ny = ReadAll(b, &y);
    ++files;
    if (nx < 0 || nx != ny || memcmp(x, y, (size_t)nx) != 0) {
      ++mismatches;
      fprintf(stderr, "rank %d: %s differs (%ld vs %ld bytes)\n", rank, rel, nx, ny);
    }
    free(x);
    free(y);
  }
  if (list) fclose(list);
  long local[2] = {files, mismatches}, total[2] = {0, 0};
  MPI_Reduce(local, total, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("files=%ld mismatches=%ld\n", total[0], total[1]);
  MPI_Finalize();
  return (list && mismatches == 0) ? 0 : 1;
}
