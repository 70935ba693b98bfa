// What the launcher variables say (bin/launcher.h), with the environment set as each
// launcher sets it.
#include "bin/launcher.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <initializer_list>
#include <utility>

namespace fanstore::cli {
namespace {

// Sets exactly `vars` among the launcher variables for the test's length.
class Env {
 public:
  explicit Env(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (const char* v : kAll) ::unsetenv(v);
    for (const auto& [k, v] : vars) ::setenv(k, v, 1);
  }
  ~Env() {
    for (const char* v : kAll) ::unsetenv(v);
  }

 private:
  static constexpr const char* kAll[] = {"PMI_RANK",
                                         "PMI_SIZE",
                                         "PMIX_RANK",
                                         "OMPI_COMM_WORLD_SIZE",
                                         "SLURM_JOB_ID",
                                         "SLURM_STEP_ID",
                                         "SLURM_STEP_NUM_TASKS",
                                         "SLURM_NTASKS",
                                         "MPI_LOCALRANKID",
                                         "OMPI_COMM_WORLD_LOCAL_RANK",
                                         "SLURM_LOCALID",
                                         "PMIX_LOCAL_RANK",
                                         "LOCAL_RANK"};
};

TEST(Launcher, NothingLaunchedThisProcess) {
  Env e({});
  EXPECT_FALSE(LaunchedByMpi());
  EXPECT_EQ(SrunWithoutPmi(), "");
  EXPECT_EQ(LauncherName(), "");
  EXPECT_EQ(LauncherLocalRank(), -1);
}

TEST(Launcher, MpiexecAndOpenMpiFormAJob) {
  {
    Env e({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "1"}});
    EXPECT_TRUE(LaunchedByMpi());
    EXPECT_EQ(LauncherName(), "mpiexec (PMI)");
    EXPECT_EQ(LauncherLocalRank(), 1);
  }
  Env e({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "3"}});
  EXPECT_TRUE(LaunchedByMpi());
  EXPECT_EQ(LauncherName(), "Open MPI (mpirun)");
  EXPECT_EQ(LauncherLocalRank(), 3);
}

TEST(Launcher, SrunWithoutPmiIsNamedWithItsFix) {
  {
    Env e({{"SLURM_JOB_ID", "7"},
           {"SLURM_STEP_ID", "0"},
           {"SLURM_STEP_NUM_TASKS", "4"},
           {"SLURM_LOCALID", "2"}});
    EXPECT_FALSE(LaunchedByMpi());
    EXPECT_NE(SrunWithoutPmi().find("srun started 4 tasks without a PMI"), std::string::npos);
    EXPECT_NE(SrunWithoutPmi().find("--mpi=pmi2"), std::string::npos);
    EXPECT_EQ(LauncherName(), "srun without PMI");
    EXPECT_EQ(LauncherLocalRank(), 2);
  }
  {  // one task, or the batch script's own shell (no step): nothing to say
    Env e({{"SLURM_JOB_ID", "7"}, {"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_TASKS", "1"}});
    EXPECT_EQ(SrunWithoutPmi(), "");
  }
  {
    Env e({{"SLURM_JOB_ID", "7"}, {"SLURM_NTASKS", "4"}});
    EXPECT_EQ(SrunWithoutPmi(), "");
    EXPECT_EQ(LauncherName(), "a Slurm allocation");
  }
  Env e({{"SLURM_JOB_ID", "7"},
         {"SLURM_STEP_ID", "0"},
         {"SLURM_STEP_NUM_TASKS", "4"},
         {"PMI_RANK", "0"},
         {"PMI_SIZE", "4"}});
  EXPECT_EQ(SrunWithoutPmi(), "");
  EXPECT_EQ(LauncherName(), "srun with PMI");
}

}  // namespace
}  // namespace fanstore::cli
