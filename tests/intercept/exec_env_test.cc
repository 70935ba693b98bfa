#include "intercept/exec_env.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace fanstore::intercept {
namespace {

std::vector<std::string> Fix(std::vector<const char*> env) {
  env.push_back(nullptr);
  char* out[64];
  char scratch[512];
  char* const* r =
      FixExecEnv(const_cast<char* const*>(env.data()), out, 64, scratch, sizeof scratch);
  std::vector<std::string> v;
  for (char* const* e = r; *e; ++e) v.emplace_back(*e);
  return v;
}

class ExecEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* start[] = {"HOME=/root", "FANSTORE_DATA=/d", "FANSTORE_LOG_LEVEL=debug",
                           "LD_PRELOAD=/opt/lib/libfanstore.so", nullptr};
    ASSERT_TRUE(CaptureExecEnv("/opt/lib/libfanstore.so", const_cast<char* const*>(start)));
  }
};

TEST_F(ExecEnv, ScrubbedEnvironmentGetsThePreloadAndTheVariables) {
  EXPECT_EQ(Fix({"PATH=/bin"}),
            (std::vector<std::string>{"PATH=/bin", "LD_PRELOAD=/opt/lib/libfanstore.so",
                                      "FANSTORE_DATA=/d", "FANSTORE_LOG_LEVEL=debug"}));
  EXPECT_EQ(Fix({}).size(), 3u);
}

TEST_F(ExecEnv, CompleteEnvironmentIsUnchanged) {
  const std::vector<std::string> env = {"A=1", "LD_PRELOAD=/x.so:/opt/lib/libfanstore.so",
                                        "FANSTORE_DATA=/other", "FANSTORE_LOG_LEVEL=info"};
  EXPECT_EQ(Fix({env[0].c_str(), env[1].c_str(), env[2].c_str(), env[3].c_str()}), env);
}

TEST_F(ExecEnv, OtherPreloadsAreKeptAfterOurs) {
  EXPECT_EQ(
      Fix({"LD_PRELOAD=/usr/lib/libjemalloc.so", "FANSTORE_DATA=/d", "FANSTORE_LOG_LEVEL=x"}),
      (std::vector<std::string>{"FANSTORE_DATA=/d", "FANSTORE_LOG_LEVEL=x",
                                "LD_PRELOAD=/opt/lib/libfanstore.so:/usr/lib/libjemalloc.so"}));
}

TEST_F(ExecEnv, ExplicitOptOutIsRespected) {
  EXPECT_EQ(Fix({"FANSTORE_INTERCEPT=0"}), (std::vector<std::string>{"FANSTORE_INTERCEPT=0"}));
}

TEST_F(ExecEnv, TooLargeForTheBuffersPassesUnchanged) {
  std::vector<const char*> env(70, "X=1");
  env.push_back(nullptr);
  char* out[64];
  char scratch[512];
  EXPECT_EQ(FixExecEnv(const_cast<char* const*>(env.data()), out, 64, scratch, sizeof scratch),
            const_cast<char* const*>(env.data()));
}

}  // namespace
}  // namespace fanstore::intercept
