// The virtual fd table (runtime/process/fd_table.h) on its own, without the hook: descriptions
// shared by dup'ed fds and by a forked child (the slab is MAP_SHARED), references counted
// across both, replacing a binding, CLOEXEC knowledge, parked fds, and a second table
// adopting the slab as an exec'd program does.
#include "runtime/process/fd_table.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>

namespace fanstore::runtime {
namespace {

// FdTable is ~280 KB (an entry per possible fd), in zero pages of its own (operator new).
std::unique_ptr<FdTable> NewTable(int slab_fd = -1) {
  return std::make_unique<FdTable>(slab_fd, 0);
}

TEST(FdTable, BindLookupUnbind) {
  auto t = NewTable();
  const int d = t->NewDesc(7, O_RDONLY);
  ASSERT_GE(d, 0);
  EXPECT_TRUE(t->ValidDesc(d));
  EXPECT_EQ(t->DescOf(40), -1);
  t->Bind(40, d);
  EXPECT_EQ(t->DescOf(40), d);
  EXPECT_EQ(t->Lookup(40)->entry, 7u);
  EXPECT_EQ(t->bound()->load(), 1);
  EXPECT_TRUE(t->bits()[0].load() >> 40 & 1);
  // Only the register's low 32 bits are the fd.
  EXPECT_EQ(t->DescOf((1L << 32) | 40), d);
  EXPECT_TRUE(t->Unbind(40));
  EXPECT_FALSE(t->Unbind(40));
  EXPECT_EQ(t->Lookup(40), nullptr);
  EXPECT_EQ(t->bound()->load(), 0);
  EXPECT_FALSE(t->ValidDesc(d));  // its last reference gone
  EXPECT_FALSE(t->Unbind(-1));
  EXPECT_FALSE(t->Unbind(kMaxFds));
}

TEST(FdTable, DupSharesTheDescriptionUntilTheLastClose) {
  auto t = NewTable();
  const int d = t->NewDesc(3, O_RDONLY);
  t->Bind(10, d);
  t->Bind(11, d);  // dup
  t->desc(d).offset.store(4096);
  EXPECT_EQ(t->Lookup(11)->offset.load(), 4096);
  EXPECT_EQ(t->desc(d).refs.load(), 2);
  EXPECT_TRUE(t->Unbind(10));
  EXPECT_TRUE(t->ValidDesc(d));
  EXPECT_EQ(t->Lookup(11)->offset.load(), 4096);
  EXPECT_TRUE(t->Unbind(11));
  EXPECT_FALSE(t->ValidDesc(d));
}

TEST(FdTable, BindingOverAnFdReleasesItsOldDescription) {
  auto t = NewTable();
  const int a = t->NewDesc(1, 0), b = t->NewDesc(2, 0);
  t->Bind(20, a);
  t->Bind(20, b);  // dup2(b's fd, 20)
  EXPECT_FALSE(t->ValidDesc(a));
  EXPECT_EQ(t->Lookup(20)->entry, 2u);
  EXPECT_EQ(t->bound()->load(), 1);
}

TEST(FdTable, DescriptionsAreReusedOnceFree) {
  auto t = NewTable();
  const int a = t->NewDesc(1, 0);
  t->Bind(5, a);
  const int b = t->NewDesc(2, 0);
  EXPECT_NE(a, b);
  t->Unbind(5);
  EXPECT_EQ(t->NewDesc(3, 0), a);  // the lowest free slot
}

TEST(FdTable, CloexecIsKnownOnlyWhereSetAndForgottenByBindAndUnbind) {
  auto t = NewTable();
  const int d = t->NewDesc(1, 0);
  t->Bind(30, d);
  EXPECT_FALSE(t->CloexecSure(30));
  t->SetCloexecSure(30, true);
  EXPECT_TRUE(t->CloexecSure(30));
  t->Bind(30, t->NewDesc(2, 0));  // a dup2 onto it: unknown again
  EXPECT_FALSE(t->CloexecSure(30));
  t->SetCloexecSure(30, true);
  t->Unbind(30);
  EXPECT_FALSE(t->CloexecSure(30));
  t->SetCloexecSure(-1, true);  // out of range: ignored
  EXPECT_FALSE(t->CloexecSure(-1));
}

TEST(FdTable, ParkedFdsStayInTheBitmapAndAreTakenLowestFirst) {
  auto t = NewTable();
  EXPECT_FALSE(t->Park(2));  // stdio is never parked
  EXPECT_TRUE(t->Park(12));
  EXPECT_TRUE(t->Park(9));
  EXPECT_TRUE(t->IsParked(12));
  EXPECT_TRUE(t->AnyParked());
  EXPECT_TRUE(t->bits()[0].load() >> 12 & 1);  // the prefilter sends calls on it to the hook
  EXPECT_EQ(t->DescOf(12), -1);                // but it names no description
  EXPECT_EQ(t->TakeParked(9), -1);             // only below `below`
  EXPECT_EQ(t->TakeParked(100), 9);
  EXPECT_FALSE(t->bits()[0].load() >> 9 & 1);
  EXPECT_TRUE(t->Unpark(12));
  EXPECT_FALSE(t->Unpark(12));
  EXPECT_FALSE(t->AnyParked());
  EXPECT_FALSE(t->bits()[0].load() >> 12 & 1);
}

TEST(FdTable, AtMostKParkMaxAreParked) {
  auto t = NewTable();
  int parked = 0;
  for (int fd = 3; fd < 3 + 2 * FdTable::kParkMax; ++fd) parked += t->Park(fd);
  EXPECT_EQ(parked, FdTable::kParkMax);
}

TEST(FdTable, AForkedChildSharesOffsetsAndCountsItsReferences) {
  auto t = NewTable();
  const int d = t->NewDesc(4, O_RDONLY);
  t->Bind(50, d);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    t->OnForkChild();
    const bool counted = t->desc(d).refs.load() == 2;
    t->desc(d).offset.store(777);  // a read in the child moves the parent's offset too
    t->ReleaseAll();               // the child exits
    _exit(counted ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's copy was not counted";
  EXPECT_EQ(t->Lookup(50)->offset.load(), 777);
  EXPECT_EQ(t->desc(d).refs.load(), 1);
  EXPECT_TRUE(t->Unbind(50));
  EXPECT_FALSE(t->ValidDesc(d));
}

TEST(FdTable, AnExecdProgramAdoptsTheSlab) {
  auto parent = NewTable();
  const int d = parent->NewDesc(9, O_RDONLY);
  parent->Bind(60, d);
  parent->desc(d).offset.store(123);
  // What the program after exec does with FANSTORE_FDS: the same slab, the fd adopted with
  // the reference the old program counted.
  auto after = NewTable(parent->slab_fd());
  EXPECT_TRUE(after->inherited());
  EXPECT_TRUE(after->ValidDesc(d));
  after->Adopt(60, d, /*add_ref=*/false);
  EXPECT_EQ(after->Lookup(60)->entry, 9u);
  EXPECT_EQ(after->Lookup(60)->offset.load(), 123);
  EXPECT_EQ(after->desc(d).refs.load(), 1);
  // Not a slab: a new one is made.
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  auto fresh = NewTable(fds[0]);
  EXPECT_FALSE(fresh->inherited());
  EXPECT_FALSE(fresh->ValidDesc(d));
  ::close(fds[0]);
  ::close(fds[1]);
}

}  // namespace
}  // namespace fanstore::runtime
