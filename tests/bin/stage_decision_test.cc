#include "bin/stage_decision.h"

#include <gtest/gtest.h>

namespace fanstore::fanrun {
namespace {

constexpr long kNfs = 0x6969, kFuse = 0x65735546, kLustre = 0x0BD00BD0, kExt4 = 0xEF53,
               kTmpfs = 0x01021994;

StageInputs OneNode(long fs_type) {
  StageInputs in;
  in.data_fs_type = fs_type;
  in.share_bytes = 10u << 20;
  in.local_free = 1u << 30;
  in.local_where = "/dev/shm";
  return in;
}

TEST(StageDecision, SharedFileSystemsAreStagedWhileTheCommandRuns) {
  for (long t : {kNfs, kFuse, kLustre, 0x47504653L /* GPFS */, 0x19830326L /* BeeGFS */,
                 0x00C36400L /* CephFS */}) {
    const StageDecision d = DecideStaging(OneNode(t));
    EXPECT_TRUE(d.stage) << std::hex << t;
    EXPECT_TRUE(d.overlap) << std::hex << t;
    EXPECT_EQ(d.why, std::string("DATA is on ") + SharedFsName(t));
  }
}

TEST(StageDecision, LocalFileSystemsAreServedInPlace) {
  for (long t : {kExt4, kTmpfs, 0x58465342L /* XFS */}) {
    const StageDecision d = DecideStaging(OneNode(t));
    EXPECT_FALSE(d.stage) << std::hex << t;
    EXPECT_EQ(d.why, std::string("DATA is on a local file system (") + LocalFsName(t) + ")");
  }
  // an unknown type is not copied, and named by its number
  EXPECT_EQ(DecideStaging(OneNode(0x1234)).why, "DATA is on a local file system (type 0x1234)");
  EXPECT_FALSE(DecideStaging(OneNode(0x1234)).stage);
}

TEST(StageDecision, FlagsOverrideTheFileSystem) {
  StageInputs in = OneNode(kExt4);
  in.stage_flag = true;
  EXPECT_TRUE(DecideStaging(in).stage);
  EXPECT_EQ(DecideStaging(in).why, "--stage");
  in = OneNode(kExt4);
  in.local_dir_given = true;
  EXPECT_TRUE(DecideStaging(in).stage);
  EXPECT_EQ(DecideStaging(in).why, "--local-dir");
  in = OneNode(kNfs);
  in.no_stage_flag = true;
  in.local_dir_given = true;
  EXPECT_FALSE(DecideStaging(in).stage);
  EXPECT_EQ(DecideStaging(in).why, "--no-stage");
}

TEST(StageDecision, SeveralNodesStageBeforeTheExchangeFromALocalDisk) {
  StageInputs in = OneNode(kExt4);
  in.nodes = 4;
  const StageDecision d = DecideStaging(in);
  EXPECT_TRUE(d.stage);
  EXPECT_FALSE(d.overlap);
  EXPECT_EQ(d.why, "4 nodes");
  in.no_stage_flag = true;
  EXPECT_FALSE(DecideStaging(in).stage);
}

TEST(StageDecision, SeveralNodesCopyWhileCmdRunsWithStage) {
  StageInputs in = OneNode(kFuse);
  in.nodes = 2;
  in.launched = true;
  StageDecision d = DecideStaging(in);
  EXPECT_TRUE(d.stage);
  EXPECT_FALSE(d.overlap);  // (from a shared file system too: local before the exchange)
  EXPECT_EQ(d.why, "2 nodes");
  in.stage_flag = true;
  d = DecideStaging(in);
  EXPECT_TRUE(d.stage && d.overlap);
  EXPECT_FALSE(d.fetch_first);
  EXPECT_EQ(d.why, "2 nodes, --stage");
}

// Under a launcher without --stage, a share on a shared file system is read once and checked
// before CMD, its copy made while CMD runs; from a local disk it is copied first; one rank
// under a launcher as several; nothing read first when the node does not stage.
TEST(StageDecision, UnderALauncherAShareOnASharedFileSystemIsReadFirst) {
  StageInputs in = OneNode(kFuse);
  in.nodes = 4;
  in.launched = true;
  EXPECT_TRUE(DecideStaging(in).fetch_first);
  in.data_fs_type = kExt4;
  StageDecision d = DecideStaging(in);
  EXPECT_TRUE(d.stage);
  EXPECT_FALSE(d.fetch_first || d.overlap);
  in = OneNode(kFuse);
  in.launched = true;  // (one rank)
  d = DecideStaging(in);
  EXPECT_TRUE(d.stage && d.fetch_first);
  EXPECT_FALSE(d.overlap);
  in.launched = false;  // (alone: the copy while CMD runs)
  d = DecideStaging(in);
  EXPECT_TRUE(d.stage && d.overlap);
  EXPECT_FALSE(d.fetch_first);
  in.launched = true;
  in.no_stage_flag = true;
  EXPECT_FALSE(DecideStaging(in).fetch_first);
}

TEST(StageDecision, TooLittleRoomServesInPlaceAndSaysWhy) {
  StageInputs in = OneNode(kFuse);
  in.share_bytes = 3ull << 30;
  in.local_free = 1ull << 30;
  const StageDecision d = DecideStaging(in);
  EXPECT_FALSE(d.stage);
  EXPECT_NE(d.why.find("DATA is on FUSE, but /dev/shm has 1.0 GiB free for 3.0 GiB"),
            std::string::npos)
      << d.why;
  EXPECT_NE(d.why.find("--local-dir"), std::string::npos);
  // asked for explicitly, it is tried (and a full disk is then named by the copy)
  in.local_dir_given = true;
  EXPECT_TRUE(DecideStaging(in).stage);
}

TEST(StageDecision, ALocalShareThatFitsInHalfOfMemoryIsWarmedInHugeFolios) {
  StageInputs in = OneNode(kExt4);
  in.mem_available = 1ull << 30;
  EXPECT_TRUE(DecideStaging(in).warm);
  in.no_stage_flag = true;  // (served in place all the same)
  EXPECT_TRUE(DecideStaging(in).warm);
  in.no_stage_flag = false;
  in.share_bytes = (512ull << 20) + 1;  // more than half of the memory
  EXPECT_FALSE(DecideStaging(in).warm);
  in.share_bytes = 10u << 20;
  in.mem_available = 0;  // (unknown)
  EXPECT_FALSE(DecideStaging(in).warm);
  for (long t : {kNfs, kFuse, kTmpfs}) {  // staged, or in memory already
    StageInputs other = OneNode(t);
    other.mem_available = 1ull << 30;
    EXPECT_FALSE(DecideStaging(other).warm) << std::hex << t;
  }
  in.mem_available = 1ull << 30;
  in.stage_flag = true;  // a copy instead
  EXPECT_FALSE(DecideStaging(in).warm);
}

TEST(StageDecision, ACopyInMemoryOverHalfOfWhatTheJobMayUseIsNotMade) {
  StageInputs in = OneNode(kFuse);
  in.local_is_memory = true;
  in.mem_available = 20u << 20;  // (a 10 MiB share: exactly half, copied)
  EXPECT_TRUE(DecideStaging(in).stage);
  in.mem_available = (20u << 20) - 2;
  const StageDecision d = DecideStaging(in);
  EXPECT_FALSE(d.stage);
  EXPECT_EQ(d.why,
            "DATA is on FUSE, but a copy of 10.0 MiB in /dev/shm would take over half of the "
            "20.0 MiB of memory this job may use (give --local-dir on a larger local disk)");
  in.local_is_memory = false;  // (a local disk: its room decides)
  EXPECT_TRUE(DecideStaging(in).stage);
  in.local_is_memory = true;
  in.mem_available = 0;  // (unknown)
  EXPECT_TRUE(DecideStaging(in).stage);
}

TEST(StageDecision, ACopyThatDoesNotFitByDefaultGoesToALocalDisk) {
  StageInputs in = OneNode(kFuse);
  in.local_is_memory = true;
  in.mem_available = 16u << 20;  // (a 10 MiB share: over half)
  in.disk_where = "/tmp";
  in.disk_free = 10u << 20;
  StageDecision d = DecideStaging(in);
  EXPECT_TRUE(d.stage);
  EXPECT_TRUE(d.overlap);
  EXPECT_EQ(d.local_dir, "/tmp");
  EXPECT_EQ(d.why,
            "DATA is on FUSE; a copy of 10.0 MiB in /dev/shm would take over half of the 16.0 "
            "MiB of memory this job may use, so the copy goes to /tmp, a local disk");
  in.mem_available = 1ull << 30;  // (short of room instead)
  in.local_free = 1u << 20;
  d = DecideStaging(in);
  EXPECT_EQ(d.local_dir, "/tmp");
  EXPECT_EQ(d.why,
            "DATA is on FUSE; /dev/shm has 1.0 MiB free for 10.0 MiB, so the copy goes to "
            "/tmp, a local disk");
  in.disk_free = (10u << 20) - 1;  // the disk too small as well: in place, said
  d = DecideStaging(in);
  EXPECT_FALSE(d.stage);
  EXPECT_TRUE(d.local_dir.empty());
  in.disk_free = 10u << 20;
  in.local_free = 1u << 30;  // /dev/shm fits: it is used, not the disk
  d = DecideStaging(in);
  EXPECT_TRUE(d.stage);
  EXPECT_TRUE(d.local_dir.empty());
  StageInputs local = OneNode(kExt4);  // DATA on a local disk is never copied to another
  local.disk_where = "/tmp";
  local.disk_free = 1ull << 30;
  local.mem_available = 1u << 20;
  EXPECT_FALSE(DecideStaging(local).stage);
}

TEST(StageDecision, ALocalShareIsCopiedToHugePagesWhereTheyCanBeMadeAndItFits) {
  StageInputs in = OneNode(kExt4);
  in.mem_available = 1ull << 30;
  in.shmem_huge = true;
  StageDecision d = DecideStaging(in);
  EXPECT_TRUE(d.stage);
  EXPECT_TRUE(d.overlap);  // (while CMD runs)
  EXPECT_FALSE(d.warm);
  EXPECT_EQ(d.why,
            "DATA is on a local file system (ext4), and a copy in huge pages in /dev/shm reads "
            "faster than its page cache (--no-stage: in place)");
  // Each reason to stay in place: no huge pages (a copy in 4 KiB pages is no faster than the
  // page cache), a share over half of the memory or the room, memory unknown, --no-stage,
  // DATA in memory already.
  StageInputs no = in;
  no.shmem_huge = false;
  EXPECT_FALSE(DecideStaging(no).stage);
  EXPECT_TRUE(DecideStaging(no).warm);
  no = in;
  no.share_bytes = (512ull << 20) + 1;
  EXPECT_FALSE(DecideStaging(no).stage);
  no = in;
  no.local_free = in.share_bytes - 1;
  EXPECT_FALSE(DecideStaging(no).stage);
  no = in;
  no.mem_available = 0;
  EXPECT_FALSE(DecideStaging(no).stage);
  no = in;
  no.no_stage_flag = true;
  EXPECT_FALSE(DecideStaging(no).stage);
  EXPECT_EQ(DecideStaging(no).why, "--no-stage");
  no = in;
  no.data_fs_type = kTmpfs;
  EXPECT_FALSE(DecideStaging(no).stage);
}

// One node's copy or warming of a local DATA takes only the time CMD leaves idle, its
// readers reading DATA in place meanwhile; from a shared file system, or under a launcher,
// the copy keeps its place (readers wait for its chunks, so that the server sees each byte
// once).
TEST(StageDecision, AOneNodeCopyOfALocalDataYieldsToTheCommand) {
  StageInputs in = OneNode(kExt4);
  in.mem_available = 1ull << 30;
  in.shmem_huge = true;
  EXPECT_TRUE(DecideStaging(in).overlap);
  EXPECT_TRUE(DecideStaging(in).yield);
  EXPECT_EQ(DecideStaging(in).start_after_s, kOwnCopyAfterS);  // (a short job never pays)
  StageInputs flag = OneNode(kExt4);
  flag.stage_flag = true;
  EXPECT_TRUE(DecideStaging(flag).yield);
  EXPECT_EQ(DecideStaging(flag).start_after_s, 0);  // (asked for: at once)
  StageInputs warmed = in;
  warmed.shmem_huge = false;
  ASSERT_TRUE(DecideStaging(warmed).warm);
  EXPECT_TRUE(DecideStaging(warmed).yield);
  for (long t : {kNfs, kFuse, kLustre}) {
    StageInputs shared = OneNode(t);
    shared.stage_flag = true;
    EXPECT_FALSE(DecideStaging(shared).yield) << std::hex << t;
  }
  StageInputs launched = in;
  launched.launched = true;
  EXPECT_FALSE(DecideStaging(launched).yield);
  StageInputs in_place = OneNode(kExt4);
  in_place.no_stage_flag = true;
  EXPECT_FALSE(DecideStaging(in_place).yield);  // (nothing to yield: too little memory)
}

}  // namespace
}  // namespace fanstore::fanrun
