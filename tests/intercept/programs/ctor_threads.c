/* Runs with threads started by a library's constructor (ctor_threads_lib.c) before any
 * preload library's: lets them run a little, then prints what they saw. */
#include <stdio.h>
#include <time.h>

void ctor_threads_finish(char* out, size_t size);

int main(void) {
  struct timespec t = {0, 20000000};
  nanosleep(&t, NULL);
  char out[256];
  ctor_threads_finish(out, sizeof out);
  puts(out);
  return 0;
}
