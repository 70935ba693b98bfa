/* stress: concurrent reads through the runtime, checked against expected checksums.
 *   stress threads LIST N   16 threads read random files of LIST (lines "path size fnv")
 *                           N times each, with shared and private fds, dup and lseek
 *   stress forks LIST N     N rounds of fork: children read with an fd opened before the
 *                           fork (sharing its offset) and files of their own
 * Prints "ok" or the first mismatch; exit 1 on any error. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
  char path[512];
  long size;
  unsigned long sum;
} File;
static File* g_files;
static int g_n;
static atomic_int g_bad;

static unsigned long Fnv(const unsigned char* p, long n) {
  unsigned long h = 1469598103934665603ul;
  for (long i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ul;
  return h;
}

static int CheckFile(const File* f, unsigned seed) {
  int fd = open(f->path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  unsigned char* buf = malloc(f->size + 1);
  long got = 0, n;
  /* mix read sizes: whole, small chunks, or pread halves */
  const int mode = seed % 3;
  if (mode == 0) {
    while ((n = read(fd, buf + got, f->size + 1 - got)) > 0) got += n;
  } else if (mode == 1) {
    while ((n = read(fd, buf + got, 4096 < f->size + 1 - got ? 4096 : f->size + 1 - got)) > 0)
      got += n;
  } else {
    const long half = f->size / 2;
    got = pread(fd, buf + half, f->size - half, half);
    got += pread(fd, buf, half, 0);
  }
  int dupfd = dup(fd);
  const long end = lseek(dupfd, 0, SEEK_END);
  close(dupfd);
  close(fd);
  const int ok = got == f->size && end == f->size && Fnv(buf, f->size) == f->sum;
  free(buf);
  return ok ? 0 : -1;
}

static long g_rounds;
static void* Thread(void* arg) {
  unsigned seed = (unsigned)(long)arg * 2654435761u;
  for (long i = 0; i < g_rounds; ++i) {
    seed = seed * 1103515245u + 12345u;
    const File* f = &g_files[(seed >> 8) % g_n];
    if (CheckFile(f, seed >> 4) != 0) {
      if (atomic_fetch_add(&g_bad, 1) == 0) fprintf(stderr, "stress: mismatch on %s\n", f->path);
    }
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: stress threads|forks LIST N\n");
    return 2;
  }
  FILE* l = fopen(argv[2], "r");
  if (!l) return 2;
  g_files = calloc(100000, sizeof(File));
  while (g_n < 100000 &&
         fscanf(l, "%511s %ld %lx", g_files[g_n].path, &g_files[g_n].size, &g_files[g_n].sum) == 3)
    ++g_n;
  fclose(l);
  g_rounds = atol(argv[3]);
  if (!strcmp(argv[1], "threads")) {
    pthread_t t[16];
    for (long i = 0; i < 16; ++i) pthread_create(&t[i], NULL, Thread, (void*)i);
    for (int i = 0; i < 16; ++i) pthread_join(t[i], NULL);
  } else {
    for (long r = 0; r < g_rounds; ++r) {
      /* an fd opened before fork: parent and child share its offset */
      int fd = open(g_files[r % g_n].path, O_RDONLY);
      char c;
      if (read(fd, &c, 1) != 1) atomic_fetch_add(&g_bad, 1);
      pid_t pid = fork();
      if (pid == 0) {
        int bad = lseek(fd, 0, SEEK_CUR) != 1;
        if (read(fd, &c, 1) != 1 && g_files[r % g_n].size > 1) bad = 1;
        for (int k = 0; k < 20; ++k)
          bad |= CheckFile(&g_files[(r * 7 + k) % g_n], (unsigned)k) != 0;
        _exit(bad);
      }
      int st = 0;
      waitpid(pid, &st, 0);
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) atomic_fetch_add(&g_bad, 1);
      /* the child's read advanced the shared offset */
      if (g_files[r % g_n].size > 1 && lseek(fd, 0, SEEK_CUR) != 2) atomic_fetch_add(&g_bad, 1);
      close(fd);
    }
  }
  printf("%s\n", atomic_load(&g_bad) ? "FAILED" : "ok");
  return atomic_load(&g_bad) ? 1 : 0;
}
