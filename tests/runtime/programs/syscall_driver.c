/* syscall_driver: a fixed sequence of file-system calls on a tree, one output line per
 * call with its result and errno name. Run natively (in a read-only bind mount of the
 * source) and under fanrun (in the mount point): the outputs must be identical.
 * fd numbers are printed as "fd", never as numbers. Usage: syscall_driver DIR */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <termios.h>
#include <unistd.h>

static const char* E(void) {
  return strerrorname_np(errno) ? strerrorname_np(errno) : "E?";
}
#define SHOW(name, expr)                  \
  do {                                    \
    errno = 0;                            \
    long _r = (long)(expr);               \
    if (_r < 0)                           \
      printf("%-34s -1 %s\n", name, E()); \
    else                                  \
      printf("%-34s %ld\n", name, _r);    \
  } while (0)
#define SHOWFD(name, fd)                  \
  do {                                    \
    if ((fd) < 0)                         \
      printf("%-34s -1 %s\n", name, E()); \
    else                                  \
      printf("%-34s fd\n", name);         \
  } while (0)

static unsigned long Sum(const unsigned char* p, long n) {
  unsigned long h = 1469598103934665603ul;
  for (long i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ul;
  return h;
}

static void Stat(const char* label, int rc, const struct stat* st) {
  if (rc < 0)
    printf("%-34s -1 %s\n", label, E());
  else
    printf("%-34s mode=%o size=%lld nlink=%lu mtime=%lld.%09ld uid=%u\n", label, st->st_mode,
           (long long)st->st_size, (unsigned long)st->st_nlink, (long long)st->st_mtim.tv_sec,
           st->st_mtim.tv_nsec, st->st_uid);
}

/* Calls on an open read-only file that are not reads: locks (HDF5 flocks every file it
 * opens), syncs, time changes, and the /proc and /dev links to the fd. */
static void FdCalls(int fd, const char* dir) {
  int d = open("meta", O_RDONLY | O_DIRECTORY);
  SHOW("flock LOCK_SH|LOCK_NB", flock(fd, LOCK_SH | LOCK_NB));
  SHOW("flock LOCK_EX", flock(fd, LOCK_EX));
  SHOW("flock LOCK_UN", flock(fd, LOCK_UN));
  SHOW("flock on a directory", flock(d, LOCK_SH));
  SHOW("flock bad operation", flock(fd, 0));
  SHOW("syncfs", syncfs(fd));
  SHOW("sync_file_range", sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE));
  SHOW("sync_file_range bad flags", sync_file_range(fd, 0, 0, 0x40));
  SHOW("sync_file_range negative", sync_file_range(fd, -1, 0, 0));
  SHOW("fallocate", fallocate(fd, 0, 0, 10));
  struct timespec omit[2] = {{0, UTIME_OMIT}, {0, UTIME_OMIT}}, bad[2] = {{0, 5000000000L}, {0, 0}};
  SHOW("futimens", futimens(fd, NULL));
  SHOW("futimens UTIME_OMIT", futimens(fd, omit));
  SHOW("futimens bad nanoseconds", futimens(fd, bad));
  SHOW("futimens with flags", syscall(SYS_utimensat, fd, NULL, NULL, AT_SYMLINK_NOFOLLOW));
  SHOW("utimensat UTIME_OMIT", utimensat(AT_FDCWD, "meta/one", omit, 0));
  SHOW("utimensat bad nanoseconds", utimensat(AT_FDCWD, "meta/one", bad, 0));
  SHOW("utimensat AT_EMPTY_PATH", utimensat(fd, "", NULL, AT_EMPTY_PATH));
  SHOW("utimensat bad flags", utimensat(AT_FDCWD, "meta/one", NULL, 0x8000000));
  /* the links to an open fd lead to its file (the kernel's would lead to a placeholder) */
  char p[128], got[16] = {0}, target[4096] = {0}, want[4096];
  struct stat st;
  snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
  int r = open(p, O_RDONLY);
  SHOW("read via /proc/self/fd/N", r < 0 ? -1 : read(r, got, sizeof got));
  printf("%-34s %s\n", "bytes via /proc/self/fd/N", got);
  if (r >= 0) close(r);
  snprintf(p, sizeof p, "/dev/fd/%d", fd);
  SHOW("stat -L /dev/fd/N: size", stat(p, &st) == 0 ? st.st_size : -1);
  SHOW("lstat /dev/fd/N: a link", lstat(p, &st) == 0 ? S_ISLNK(st.st_mode) : -1);
  snprintf(want, sizeof want, "%s/meta/one", dir);
  SHOW("readlink /dev/fd/N: the file",
       readlink(p, target, sizeof target - 1) > 0 ? !strcmp(target, want) : -1);
  snprintf(p, sizeof p, "/proc/%d/fd/%d/x", getpid(), fd);
  SHOW("open /proc/PID/fd/FILE/x", open(p, O_RDONLY));
  snprintf(p, sizeof p, "/proc/self/fd/%d/one", d);
  r = open(p, O_RDONLY);
  SHOW("read via /proc/self/fd/DIR/one", r < 0 ? -1 : read(r, got, sizeof got));
  if (r >= 0) close(r);
  int saved = dup(0);
  dup2(fd, 0);
  r = open("/dev/stdin", O_RDONLY);
  SHOW("read via /dev/stdin", r < 0 ? -1 : read(r, got, sizeof got));
  if (r >= 0) close(r);
  dup2(saved, 0);
  close(saved);
  close(d);
}

static sigjmp_buf g_fault;
static void OnFault(int sig) {
  siglongjmp(g_fault, sig);
}

/* What a read of `p` gives: "readable", "SIGBUS" or "SIGSEGV". */
static const char* Probe(const volatile unsigned char* p) {
  struct sigaction sa = {.sa_handler = OnFault}, old_bus, old_segv;
  sigaction(SIGBUS, &sa, &old_bus);
  sigaction(SIGSEGV, &sa, &old_segv);
  const char* what = "readable";
  int sig = sigsetjmp(g_fault, 1);
  if (sig == 0)
    (void)*p;
  else
    what = sig == SIGBUS ? "SIGBUS" : "SIGSEGV";
  sigaction(SIGBUS, &old_bus, NULL);
  sigaction(SIGSEGV, &old_segv, NULL);
  return what;
}

/* A mapping that runs past the end of a file: its last page is zero after the end, the
 * pages after it raise SIGBUS; from an offset, and with write access of a private copy. */
static void MapPastEnd(const char* path) {
  int fd = open(path, O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    printf("%-34s -1 %s\n", "map past end: open", E());
    return;
  }
  long page = 4096, size = st.st_size, end = (size + page - 1) / page * page;
  for (long off = 0; off < end; off += page) {
    long len = end - off + 2 * page;
    unsigned char* m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, off);
    if (m == MAP_FAILED) {
      printf("%-34s -1 %s\n", "map past end", E());
      continue;
    }
    long zeros = 0;
    for (long k = size - off; k < end - off; ++k) zeros += m[k] == 0;
    printf("map past end at %ld: sum %lx, %ld of %ld zero, next page %s\n", off, Sum(m, size - off),
           zeros, end - size, Probe(m + end - off));
    m[size - off] = 1; /* a private copy: writable past the end within the page */
    munmap(m, len);
  }
  unsigned char* m = mmap(NULL, page, PROT_READ, MAP_PRIVATE, fd, end); /* wholly past it */
  if (m == MAP_FAILED)
    printf("%-34s -1 %s\n", "map past end: beyond", E());
  else
    printf("map past end beyond the last page: %s\n", Probe(m));
  if (m != MAP_FAILED) munmap(m, page);
  close(fd);
}

static long Openat2Call(int dirfd, const char* path, unsigned long long flags,
                        unsigned long long mode, unsigned long long resolve, size_t size) {
  char how[64] = {0};
  struct open_how h = {.flags = flags, .mode = mode, .resolve = resolve};
  memcpy(how, &h, sizeof h);
  if (size == 65) {
    size = 64;
    how[40] = 1;
  } /* a larger struct with a non-zero tail */
  long fd = syscall(SYS_openat2, dirfd, path, how, size);
  if (fd >= 0) close((int)fd);
  return fd >= 0 ? 0 : -1; /* (not the fd number) */
}

/* openat2: the open_how checks, then the resolve flags inside the dataset. */
static void Openat2(const char* dir) {
  int d = open("meta", O_RDONLY | O_DIRECTORY);
  char abs[4096];
  snprintf(abs, sizeof abs, "%s/meta/one", dir);
  SHOW("openat2", Openat2Call(AT_FDCWD, "meta/one", O_RDONLY, 0, 0, 24));
  SHOW("openat2 missing", Openat2Call(AT_FDCWD, "meta/nope", O_RDONLY, 0, 0, 24));
  SHOW("openat2 for writing", Openat2Call(AT_FDCWD, "meta/one", O_WRONLY, 0, 0, 24));
  SHOW("openat2 O_CREAT new", Openat2Call(AT_FDCWD, "meta/new", O_CREAT | O_WRONLY, 0644, 0, 24));
  SHOW("openat2 size too small", Openat2Call(AT_FDCWD, "meta/one", O_RDONLY, 0, 0, 8));
  SHOW("openat2 size over a page", Openat2Call(AT_FDCWD, "meta/one", O_RDONLY, 0, 0, 8192));
  SHOW("openat2 larger, zero tail", Openat2Call(AT_FDCWD, "meta/one", O_RDONLY, 0, 0, 64));
  SHOW("openat2 larger, non-zero tail", Openat2Call(AT_FDCWD, "meta/one", O_RDONLY, 0, 0, 65));
  SHOW("openat2 mode without O_CREAT", Openat2Call(AT_FDCWD, "meta/one", O_RDONLY, 0644, 0, 24));
  SHOW("openat2 unknown flag", Openat2Call(AT_FDCWD, "meta/one", 1ull << 40, 0, 0, 24));
  SHOW("openat2 unknown resolve", Openat2Call(AT_FDCWD, "meta/one", O_RDONLY, 0, 1 << 20, 24));
  SHOW("openat2 O_PATH with O_RDWR", Openat2Call(AT_FDCWD, "meta/one", O_PATH | O_RDWR, 0, 0, 24));
  SHOW("openat2 BENEATH and IN_ROOT",
       Openat2Call(d, "one", O_RDONLY, 0, RESOLVE_BENEATH | RESOLVE_IN_ROOT, 24));
  SHOW("openat2 CACHED with O_CREAT",
       Openat2Call(AT_FDCWD, "meta/one", O_CREAT, 0, RESOLVE_CACHED, 24));
  SHOW("openat2 CACHED", Openat2Call(AT_FDCWD, "meta/one", O_RDONLY, 0, RESOLVE_CACHED, 24));
  SHOW("openat2 NO_SYMLINKS final link",
       Openat2Call(AT_FDCWD, "meta/link", O_RDONLY, 0, RESOLVE_NO_SYMLINKS, 24));
  SHOW("openat2 NO_SYMLINKS dir link",
       Openat2Call(AT_FDCWD, "meta/dirlink/b/c/leaf.txt", O_RDONLY, 0, RESOLVE_NO_SYMLINKS, 24));
  SHOW("openat2 NO_SYMLINKS O_PATH link",
       Openat2Call(AT_FDCWD, "meta/link", O_PATH | O_NOFOLLOW, 0, RESOLVE_NO_SYMLINKS, 24));
  SHOW("openat2 NO_SYMLINKS plain",
       Openat2Call(AT_FDCWD, "deep/a/b/c/leaf.txt", O_RDONLY, 0, RESOLVE_NO_SYMLINKS, 24));
  SHOW("openat2 NO_XDEV inside", Openat2Call(d, "one", O_RDONLY, 0, RESOLVE_NO_XDEV, 24));
  SHOW("openat2 NO_XDEV absolute", Openat2Call(d, abs, O_RDONLY, 0, RESOLVE_NO_XDEV, 24));
  SHOW("openat2 NO_XDEV leaving", Openat2Call(d, "../..", O_RDONLY, 0, RESOLVE_NO_XDEV, 24));
  int fd = open("meta/one", O_RDONLY);
  char p[64];
  snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
  SHOW("openat2 NO_MAGICLINKS fd link",
       Openat2Call(AT_FDCWD, p, O_RDONLY, 0, RESOLVE_NO_MAGICLINKS, 24));
  close(fd);
  close(d);
}

int main(int argc, char** argv) {
  if (argc != 2 || chdir(argv[1]) != 0) {
    fprintf(stderr, "usage: syscall_driver DIR\n");
    return 2;
  }
  char buf[65536];
  struct stat st;
  errno = 0;
  /* a NULL path to the stat family: EFAULT, as the kernel answers, never a crash */
  SHOW("newfstatat NULL path", syscall(SYS_newfstatat, AT_FDCWD, NULL, &st, 0));
#ifdef SYS_stat /* (x86-64's; aarch64 has only the *at calls) */
  SHOW("stat NULL path", syscall(SYS_stat, NULL, &st));
  SHOW("lstat NULL path", syscall(SYS_lstat, NULL, &st));
#endif
  /* open and read */
  int fd = open("meta/numbers.txt", O_RDONLY);
  SHOWFD("open file", fd);
  long n = read(fd, buf, 10);
  printf("%-34s %ld %lx\n", "read 10", n, Sum((unsigned char*)buf, n));
  SHOW("lseek SET 5", lseek(fd, 5, SEEK_SET));
  n = read(fd, buf, 7);
  printf("%-34s %ld %.7s\n", "read 7 at 5", n, buf);
  SHOW("lseek CUR 0", lseek(fd, 0, SEEK_CUR));
  SHOW("lseek END -3", lseek(fd, -3, SEEK_END));
  n = read(fd, buf, 100);
  printf("%-34s %ld\n", "read at end-3", n);
  SHOW("read at EOF", read(fd, buf, 100));
  SHOW("lseek bad whence", lseek(fd, 0, 42));
  SHOW("lseek negative", lseek(fd, -1, SEEK_SET));
  SHOW("lseek past end", lseek(fd, 1000000, SEEK_SET));
  SHOW("read past end", read(fd, buf, 10));
  SHOW("SEEK_DATA 0", lseek(fd, 0, SEEK_DATA));
  SHOW("SEEK_HOLE 0", lseek(fd, 0, SEEK_HOLE));
  SHOW("SEEK_DATA past end", lseek(fd, 10000000, SEEK_DATA));
  n = pread(fd, buf, 20, 100);
  printf("%-34s %ld %lx\n", "pread 20@100", n, Sum((unsigned char*)buf, n));
  SHOW("pread negative", pread(fd, buf, 20, -5));
  lseek(fd, 0, SEEK_SET);
  char a[5], b[9];
  struct iovec iov[2] = {{a, sizeof a}, {b, sizeof b}};
  n = readv(fd, iov, 2);
  printf("%-34s %ld %.5s|%.9s\n", "readv 5+9", n, a, b);
  n = preadv(fd, iov, 2, 50);
  printf("%-34s %ld %.5s|%.9s\n", "preadv 5+9 @50", n, a, b);
  Stat("fstat", fstat(fd, &st), &st);
  Stat("fstatat AT_EMPTY_PATH", fstatat(fd, "", &st, AT_EMPTY_PATH), &st);
  SHOW("fcntl F_GETFL accmode", fcntl(fd, F_GETFL) & O_ACCMODE);
  SHOW("fcntl F_GETFD", fcntl(fd, F_GETFD));
  SHOW("fcntl F_SETFD CLOEXEC", fcntl(fd, F_SETFD, FD_CLOEXEC));
  SHOW("fcntl F_GETFD again", fcntl(fd, F_GETFD));
  struct termios t;
  SHOW("ioctl TCGETS", ioctl(fd, TCGETS, &t));
  int avail = -1;
  lseek(fd, 100, SEEK_SET);
  SHOW("ioctl FIONREAD rc", ioctl(fd, FIONREAD, &avail));
  printf("%-34s %d\n", "FIONREAD value", avail);
  SHOW("posix_fadvise", posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL));
  SHOW("write to read-only fd", write(fd, "x", 1));
  /* dup shares the offset */
  int d = dup(fd);
  SHOWFD("dup", d);
  lseek(fd, 7, SEEK_SET);
  SHOW("offset seen through dup", lseek(d, 0, SEEK_CUR));
  int d2 = fcntl(fd, F_DUPFD_CLOEXEC, 50);
  SHOW("F_DUPFD_CLOEXEC >= 50", d2 >= 50 ? 1 : -1);
  SHOW("dup2 onto 60", dup2(fd, 60) == 60 ? 60 : -1);
  n = read(60, buf, 3);
  printf("%-34s %ld %.3s\n", "read via dup2 fd", n, buf);
  SHOW("close dup", close(d));
  SHOW("close F_DUPFD", close(d2));
  SHOW("close 60", close(60));
  SHOW("close", close(fd));
  SHOW("read after close", read(fd, buf, 1));
  SHOW("close again", close(fd));
  SHOW("fstat after close", fstat(fd, &st));
  /* fd numbers and close-on-exec through close and reopen (the runtime keeps a closed
   * fd's placeholder for the next open: runtime/process/fd_table.h, parked fds) */
  {
    int f1 = open("meta/numbers.txt", O_RDONLY | O_CLOEXEC);
    close(f1);
    int f2 = open("meta/numbers.txt", O_RDONLY | O_CLOEXEC);
    printf("%-34s %s\n", "reopen takes the closed number", f2 == f1 ? "yes" : "no");
    SHOW("F_GETFD of O_CLOEXEC open", fcntl(f2, F_GETFD));
    close(f2);
    SHOW("F_GETFD of a closed fd", fcntl(f2, F_GETFD));
    SHOW("F_DUPFD of a closed fd", fcntl(f2, F_DUPFD, 0));
    SHOW("dup of a closed fd", dup(f2));
    SHOW("dup2 from a closed fd", dup2(f2, 61));
    SHOW("lseek of a closed fd", lseek(f2, 0, SEEK_SET));
    SHOW("fstatat \"\" of a closed fd", fstatat(f2, "", &st, AT_EMPTY_PATH));
    SHOW("fchdir to a closed fd", fchdir(f2));
    SHOW("mmap of a closed fd",
         mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, f2, 0) == MAP_FAILED ? -1 : 0);
    SHOW("close of a closed fd", close(f2));
    int p[2];
    if (pipe(p) == 0) {
      printf("%-34s %s\n", "dup2 onto a closed fd", dup2(p[0], f2) == f2 ? "yes" : "no");
      char c = 0;
      SHOW("write to the pipe", write(p[1], "x", 1));
      SHOW("read it through that fd", read(f2, &c, 1));
      printf("%-34s %c\n", "byte read", c);
      SHOW("close it", close(f2));
      close(p[0]);
      close(p[1]);
    }
    int f3 = open("meta/numbers.txt", O_RDONLY);
    SHOW("F_GETFD of an open without it", fcntl(f3, F_GETFD));
    SHOW("FIOCLEX", ioctl(f3, FIOCLEX));
    SHOW("F_GETFD after FIOCLEX", fcntl(f3, F_GETFD));
    SHOW("FIONCLEX", ioctl(f3, FIONCLEX));
    SHOW("F_GETFD after FIONCLEX", fcntl(f3, F_GETFD));
    close(f3);
    int f4 = open("meta/numbers.txt", O_RDONLY | O_CLOEXEC);
    SHOW("F_SETFD 0", fcntl(f4, F_SETFD, 0));
    close(f4);
    int f5 = open("meta/numbers.txt", O_RDONLY | O_CLOEXEC);
    printf("%-34s %s\n", "reopen after F_SETFD, same number", f5 == f4 ? "yes" : "no");
    SHOW("its F_GETFD", fcntl(f5, F_GETFD));
    close(f5);
    SHOW("close_range over a closed fd", syscall(SYS_close_range, f5, f5, 0));
    int f6 = open("meta/numbers.txt", O_RDONLY);
    printf("%-34s %s\n", "then an open, same number", f6 == f5 ? "yes" : "no");
    SHOW("its F_GETFD", fcntl(f6, F_GETFD));
    close(f6);
    /* a closed low fd is the next open's number */
    int g1 = open("meta/numbers.txt", O_RDONLY | O_CLOEXEC);
    int g2 = open("meta/numbers.txt", O_RDONLY | O_CLOEXEC);
    int low = dup(0);
    close(g1);
    close(g2);
    close(low);
    int g3 = open("meta/numbers.txt", O_RDONLY | O_CLOEXEC);
    printf("%-34s %s\n", "open after closing lower fds",
           g3 == (low < g1 ? low : g1) ? "lowest" : "not lowest");
    close(g3);
  }
  /* mmap */
  fd = open("meta/numbers.txt", O_RDONLY);
  fstat(fd, &st);
  void* m = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (m == MAP_FAILED)
    printf("%-34s -1 %s\n", "mmap", E());
  else
    printf("%-34s ok %lx\n", "mmap", Sum(m, st.st_size));
  if (m != MAP_FAILED) munmap(m, st.st_size);
  void* w = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  SHOW("mmap shared writable", w == MAP_FAILED ? -1 : 0);
  close(fd);
  MapPastEnd("meta/numbers.txt");
  MapPastEnd("meta/pages.bin");
  /* a 1-byte file: packed tight, off a page boundary in the blob */
  fd = open("meta/one", O_RDONLY);
  m = mmap(NULL, 1, PROT_READ, MAP_PRIVATE, fd, 0);
  if (m == MAP_FAILED)
    printf("%-34s -1 %s\n", "mmap 1-byte file", E());
  else
    printf("%-34s ok %lx\n", "mmap 1-byte file", Sum(m, 1));
  if (m != MAP_FAILED) munmap(m, 1);
  close(fd);
  /* open errors */
  SHOWFD("open missing", open("meta/nope", O_RDONLY));
  SHOWFD("open file/child", open("meta/numbers.txt/x", O_RDONLY));
  SHOWFD("open dir O_WRONLY", open("meta", O_WRONLY));
  SHOWFD("open file O_WRONLY", open("meta/numbers.txt", O_WRONLY));
  SHOWFD("open file O_RDWR", open("meta/numbers.txt", O_RDWR));
  SHOWFD("open O_CREAT new", open("meta/new.txt", O_CREAT | O_WRONLY, 0644));
  SHOWFD("open O_CREAT|O_EXCL existing",
         open("meta/numbers.txt", O_CREAT | O_EXCL | O_RDONLY, 0644));
  SHOWFD("open O_DIRECTORY on file", open("meta/numbers.txt", O_RDONLY | O_DIRECTORY));
  SHOWFD("open O_NOFOLLOW on symlink", open("meta/link", O_RDONLY | O_NOFOLLOW));
  SHOWFD("open symlink (followed)", open("meta/link", O_RDONLY));
  SHOWFD("open missing in missing dir", open("nodir/x", O_RDONLY));
  SHOWFD("open trailing slash on file", open("meta/numbers.txt/", O_RDONLY));
  fd = open("meta", O_RDONLY | O_DIRECTORY);
  SHOWFD("open dir", fd);
  SHOW("read on dir", read(fd, buf, 10));
  int fd2 = openat(fd, "numbers.txt", O_RDONLY);
  SHOWFD("openat relative to dir fd", fd2);
  close(fd2);
  SHOWFD("openat dirfd=file", openat(open("meta/one", O_RDONLY), "x", O_RDONLY));
  Stat("fstatat relative to dir fd", fstatat(fd, "one", &st, 0), &st);
  close(fd);
  /* directory listing */
  DIR* dir = opendir("meta");
  char names[64][300];
  int k = 0;
  struct dirent* de;
  while ((de = readdir(dir)) && k < 64) snprintf(names[k++], 300, "%s:%d", de->d_name, de->d_type);
  closedir(dir);
  qsort(names, k, 300, (int (*)(const void*, const void*))strcmp);
  printf("%-34s", "readdir meta");
  for (int i = 0; i < k; ++i) printf(" %s", names[i]);
  printf("\n");
  SHOW("opendir on file", opendir("meta/one") ? 0 : -1);
  /* stat family */
  Stat("stat file", stat("meta/one", &st), &st);
  Stat("stat dir", stat("meta", &st), &st);
  Stat("stat symlink", stat("meta/link", &st), &st);
  Stat("lstat symlink", lstat("meta/link", &st), &st);
  Stat("stat missing", stat("meta/nope", &st), &st);
  Stat("stat through file", stat("meta/one/x", &st), &st);
  Stat("stat with ..", stat("meta/../meta/one", &st), &st);
  Stat("stat dir symlink/..", stat("meta/dirlink/b/c/leaf.txt", &st), &st);
  struct statx sx;
  errno = 0;
  int rc = statx(AT_FDCWD, "meta/one", 0, STATX_BASIC_STATS, &sx);
  printf("%-34s %d size=%llu mode=%o mtime=%lld.%u basic=%d\n", "statx", rc,
         (unsigned long long)sx.stx_size, sx.stx_mode, (long long)sx.stx_mtime.tv_sec,
         sx.stx_mtime.tv_nsec, (sx.stx_mask & STATX_BASIC_STATS) == STATX_BASIC_STATS);
  n = readlink("meta/link", buf, sizeof buf);
  printf("%-34s %ld %.*s\n", "readlink", n, (int)(n > 0 ? n : 0), buf);
  SHOW("readlink on file", readlink("meta/one", buf, sizeof buf));
  n = readlink("meta/link", buf, 3);
  printf("%-34s %ld %.3s\n", "readlink truncated", n, buf);
  SHOW("access R_OK", access("meta/one", R_OK));
  SHOW("access W_OK", access("meta/one", W_OK));
  SHOW("access X_OK file", access("meta/one", X_OK));
  SHOW("access X_OK dir", access("meta", X_OK));
  SHOW("access missing", access("meta/nope", F_OK));
  SHOW("faccessat2 AT_EACCESS", syscall(SYS_faccessat2, AT_FDCWD, "meta/one", R_OK, AT_EACCESS));
  /* mutations */
  SHOW("mkdir", mkdir("meta/newdir", 0755));
  SHOW("mkdir existing", mkdir("meta", 0755));
  SHOW("rmdir", rmdir("meta/empty dir"));
  SHOW("rmdir missing", rmdir("meta/nope"));
  SHOW("unlink", unlink("meta/one"));
  SHOW("unlink missing", unlink("meta/nope"));
  SHOW("rename", rename("meta/one", "meta/two"));
  SHOW("rename missing", rename("meta/nope", "meta/two"));
  SHOW("link", link("meta/one", "meta/hard"));
  SHOW("symlink new", symlink("one", "meta/sym2"));
  SHOW("symlink existing", symlink("one", "meta/link"));
  SHOW("chmod", chmod("meta/one", 0600));
  SHOW("chown", chown("meta/one", 0, 0));
  /* meta/outlink points outside the tree: only the NOFOLLOW form touches the dataset. */
  SHOW("fchownat nofollow",
       fchownat(AT_FDCWD, "meta/outlink", getuid(), getgid(), AT_SYMLINK_NOFOLLOW));
  SHOW("fchownat follow", fchownat(AT_FDCWD, "meta/outlink", getuid(), getgid(), 0));
  SHOW("truncate", truncate("meta/one", 0));
  SHOW("utimensat", utimensat(AT_FDCWD, "meta/one", NULL, 0));
  SHOW("setxattr", setxattr("meta/one", "user.x", "1", 1, 0));
  SHOW("getxattr", getxattr("meta/one", "user.x", buf, sizeof buf));
  SHOW("listxattr", listxattr("meta/one", buf, sizeof buf));
  fd = open("meta/one", O_RDONLY);
  SHOW("ftruncate", ftruncate(fd, 0));
  SHOW("fchmod", fchmod(fd, 0600));
  FdCalls(fd, argv[1]);
  close(fd);
  SHOW("creat existing", creat("meta/one", 0644));
  SHOW("creat new", creat("meta/new", 0644));
  SHOW("creat in missing dir", creat("meta/nope/new", 0644));
  SHOW("open O_TMPFILE", open("meta", O_TMPFILE | O_RDWR, 0600));
  SHOW("open O_TMPFILE read-only", open("meta", O_TMPFILE | O_RDONLY, 0600));
  Openat2(argv[1]);
  /* readiness: a regular file or directory is always readable and writable; epoll
   * refuses it. Mixed with a pipe that has data and one that has none. */
  {
    int file = open("meta/numbers.txt", O_RDONLY), dir = open("deep", O_RDONLY | O_DIRECTORY);
    int full[2], empty[2];
    if (pipe(full) != 0 || pipe(empty) != 0 || write(full[1], "x", 1) != 1) return 3;
    struct pollfd p[6] = {{file, POLLIN, 0},    {dir, POLLIN | POLLOUT | POLLPRI, 0},
                          {full[0], POLLIN, 0}, {empty[0], POLLIN, 0},
                          {-1, POLLIN, 0},      {file, 0, 0}};
    rc = poll(p, 6, 1000);
    printf("%-34s %d %x %x %x %x %x %x\n", "poll mixed", rc, p[0].revents, p[1].revents,
           p[2].revents, p[3].revents, p[4].revents, p[5].revents);
    struct pollfd q[2] = {{empty[0], POLLIN, 0}, {file, POLLOUT, 0}};
    struct timespec zero = {0, 0};
    rc = ppoll(q, 2, &zero, NULL);
    printf("%-34s %d %x %x\n", "ppoll", rc, q[0].revents, q[1].revents);
    struct pollfd z[1] = {{file, 0, 0}};
    SHOW("poll nothing asked, timeout 0", poll(z, 1, 0));
    fd_set r, w, e;
    FD_ZERO(&r);
    FD_ZERO(&w);
    FD_ZERO(&e);
    FD_SET(file, &r);
    FD_SET(empty[0], &r);
    FD_SET(dir, &w);
    FD_SET(file, &e);
    struct timeval tv = {1, 0};
    int maxfd = file > dir ? file : dir;
    if (empty[0] > maxfd) maxfd = empty[0];
    rc = select(maxfd + 1, &r, &w, &e, &tv);
    printf("%-34s %d r=%d,%d w=%d e=%d\n", "select mixed", rc, FD_ISSET(file, &r),
           FD_ISSET(empty[0], &r), FD_ISSET(dir, &w), FD_ISSET(file, &e));
    FD_ZERO(&r);
    FD_SET(file, &r);
    rc = pselect(file + 1, &r, NULL, NULL, &zero, NULL);
    printf("%-34s %d r=%d\n", "pselect", rc, FD_ISSET(file, &r));
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN};
    SHOW("epoll_ctl add file", epoll_ctl(ep, EPOLL_CTL_ADD, file, &ev));
    SHOW("epoll_ctl add dir", epoll_ctl(ep, EPOLL_CTL_ADD, dir, &ev));
    SHOW("epoll_ctl del file", epoll_ctl(ep, EPOLL_CTL_DEL, file, &ev));
    SHOW("epoll_ctl add pipe", epoll_ctl(ep, EPOLL_CTL_ADD, full[0], &ev));
    SHOW("epoll_ctl on a file as epfd", epoll_ctl(file, EPOLL_CTL_ADD, full[0], &ev));
    /* bad pointers with a virtual fd open: EFAULT, as the kernel answers, never a crash */
    struct timeval tv0 = {0, 0};
    struct pollfd* volatile bad_fds = (struct pollfd*)8; /* volatile: no compile-time check */
    fd_set* volatile bad_set = (fd_set*)8;
    SHOW("poll bad pointer", poll(bad_fds, 2, 0));
    SHOW("ppoll bad pointer", ppoll(bad_fds, 2, &zero, NULL));
    SHOW("select bad set", select(file + 1, bad_set, NULL, NULL, &tv0));
    SHOW("pselect bad set", pselect(file + 1, NULL, bad_set, NULL, &zero, NULL));
    struct pollfd* ro =
        mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ro[0].fd = file;
    ro[0].events = POLLIN;
    ro[0].revents = 0;
    mprotect(ro, 4096, PROT_READ);
    SHOW("poll read-only array", poll(ro, 1, 0));
    fd_set* ros = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    FD_ZERO(ros);
    FD_SET(file, ros);
    mprotect(ros, 4096, PROT_READ);
    SHOW("select read-only set", select(file + 1, ros, NULL, NULL, &tv0));
    munmap(ro, 4096);
    munmap(ros, 4096);
    close(ep);
    close(file);
    SHOW("epoll_ctl add closed", epoll_ctl(dir, EPOLL_CTL_ADD, file, &ev));
    struct pollfd c[1] = {{file, POLLIN, 0}};
    rc = poll(c, 1, 0);
    printf("%-34s %d %x\n", "poll closed fd", rc, c[0].revents);
    close(dir);
    close(full[0]);
    close(full[1]);
    close(empty[0]);
    close(empty[1]);
  }
  struct statfs sfs;
  rc = statfs("meta", &sfs);
  printf("%-34s %d rdonly=%d\n", "statfs", rc, rc == 0 && (sfs.f_flags & ST_RDONLY) != 0);
  /* cwd */
  SHOW("chdir meta", chdir("meta"));
  char cwd[4096];
  printf("%-34s %s\n", "getcwd basename", getcwd(cwd, sizeof cwd) ? strrchr(cwd, '/') + 1 : E());
  SHOWFD("open relative after chdir", open("one", O_RDONLY));
  SHOW("chdir file", chdir("one"));
  SHOW("chdir ..", chdir(".."));
  fd = open("deep", O_RDONLY | O_DIRECTORY);
  SHOW("fchdir", fchdir(fd));
  printf("%-34s %s\n", "getcwd basename", getcwd(cwd, sizeof cwd) ? strrchr(cwd, '/') + 1 : E());
  SHOWFD("open relative after fchdir", open("a/b/c/leaf.txt", O_RDONLY));
  return 0;
}
