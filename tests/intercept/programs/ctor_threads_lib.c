/* A library whose constructor starts threads, as UCX's does (its VFS thread), so that they
 * already run when the preload library's constructor patches libc: four spin in libc's
 * getpid, one blocks in read on a pipe, one sleeps in a nanosleep loop. With
 * CTOR_THREADS_BLOCK=1 every thread blocks all signals first (it cannot be stopped).
 * ctor_threads_finish stops them and reports what each saw afterwards. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { kSpinners = 4, kThreads = kSpinners + 2 };
static pthread_t threads[kThreads];
static int pipe_fds[2];
static atomic_int stop;
static int open_errno[kThreads];
static char read_byte;
static long read_result;

static void OpenAfter(int i) {
  int fd = open("/fanstore-test/eio", O_RDONLY);
  open_errno[i] = fd < 0 ? errno : 0;
  if (fd >= 0) close(fd);
}

static void* Spin(void* arg) {
  while (!atomic_load(&stop)) getpid();
  OpenAfter((int)(long)arg);
  return NULL;
}

static void* Read(void* arg) {
  read_result = read(pipe_fds[0], &read_byte, 1);
  OpenAfter((int)(long)arg);
  return NULL;
}

static void* Sleep(void* arg) {
  while (!atomic_load(&stop)) {
    struct timespec t = {0, 1000000};
    nanosleep(&t, NULL);
  }
  OpenAfter((int)(long)arg);
  return NULL;
}

__attribute__((constructor)) static void StartThreads(void) {
  if (pipe(pipe_fds) != 0) abort();
  /* A new thread starts with its creator's mask: blocked from its first instruction. */
  const char* b = getenv("CTOR_THREADS_BLOCK");
  sigset_t all, old;
  sigfillset(&all);
  if (b && strcmp(b, "1") == 0) pthread_sigmask(SIG_BLOCK, &all, &old);
  for (long i = 0; i < kThreads; ++i) {
    void* (*fn)(void*) = i < kSpinners ? Spin : i == kSpinners ? Read : Sleep;
    if (pthread_create(&threads[i], NULL, fn, (void*)i) != 0) abort();
  }
  if (b && strcmp(b, "1") == 0) pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* Stops the threads; writes "read=<n><byte> opens=<errno names>" into out. */
void ctor_threads_finish(char* out, size_t size) {
  atomic_store(&stop, 1);
  if (write(pipe_fds[1], "x", 1) != 1) abort();
  for (int i = 0; i < kThreads; ++i) pthread_join(threads[i], NULL);
  int n = snprintf(out, size, "read=%ld%c opens=", read_result, read_byte);
  for (int i = 0; i < kThreads && n > 0 && (size_t)n < size; ++i)
    n += snprintf(out + n, size - n, "%s%s", i ? "," : "",
                  open_errno[i] == EHOSTDOWN ? "EHOSTDOWN"
                  : open_errno[i] == ENOENT  ? "ENOENT"
                                             : strerror(open_errno[i]));
}
