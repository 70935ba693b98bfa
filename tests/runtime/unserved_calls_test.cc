#include "runtime/names/unserved_calls.h"

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <string>

namespace fanstore::runtime {
namespace {

// A system call newer than the table was checked against may take a path, and would then
// reach fanrun's skeleton directories: this fails on a machine whose kernel headers know
// such a call, until it has been looked at (and added to kUnservedCalls if it takes one).
TEST(UnservedCalls, EverySystemCallOfTheHeadersWasClassified) {
#if defined(__x86_64__)
  const char* headers = "/usr/include/x86_64-linux-gnu/asm/unistd_64.h";
#else
  const char* headers = "/usr/include/asm-generic/unistd.h";  // aarch64's table
#endif
  std::ifstream h(headers);
  if (!h) GTEST_SKIP() << "no kernel headers at " << headers << " (linux-libc-dev)";
  const std::regex define(R"(#define __NR_(\w+) (\d+))");
  long highest = -1;
  std::string newest;
  for (std::string line; std::getline(h, line);) {
    std::smatch m;
    if (std::regex_search(line, m, define) && std::stol(m[2]) > highest) {
      highest = std::stol(m[2]);
      newest = m[1];
    }
  }
  ASSERT_GT(highest, 300) << "the header lists no system calls";
  EXPECT_LE(highest, kHighestClassified)
      << "__NR_" << newest << " (" << highest << ") is newer than runtime/names/unserved_calls.h";
}

TEST(UnservedCalls, EachCallOnceWithItsPathArguments) {
  std::set<long> seen;
  for (const UnservedCall& c : kUnservedCalls) {
    EXPECT_TRUE(seen.insert(c.nr).second) << c.name;
    EXPECT_LE(c.nr, kHighestClassified) << c.name;
    for (int k = 0; k < 2; ++k) {
      EXPECT_LT(c.path[k], 6) << c.name;
      EXPECT_LT(c.dirfd[k], 6) << c.name;
      if (c.path[k] < 0) {
        EXPECT_LT(c.dirfd[k], 0) << c.name;
      }
    }
    EXPECT_GE(c.path[0], 0) << c.name;
  }
}

}  // namespace
}  // namespace fanstore::runtime
