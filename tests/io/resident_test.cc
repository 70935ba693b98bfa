// The page-check rules the runtime and the agent share (io/resident.h): which bytes may be
// copied from a blob's mapping, and when a member read before may skip mincore.
#include "io/resident.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <thread>
#include <vector>

namespace fanstore::io {
namespace {

constexpr int64_t kCheck = 100, kPause = 1000;

TEST(ResidentBytes, BoundsAndEveryPage) {
  std::vector<uint8_t> map(5 * kMinPage);
  unsigned char vec[8];
  int calls = 0;
  auto all = [&](const uint8_t*, uint64_t n, unsigned char* v) {
    ++calls;
    for (uint64_t i = 0; i < n / base::PageSize(); ++i) v[i] = 1;
    return 0;
  };
  auto one_missing = [&](const uint8_t*, uint64_t n, unsigned char* v) {
    for (uint64_t i = 0; i < n / base::PageSize(); ++i) v[i] = i == 1 ? 0 : 1;
    return 0;
  };
  EXPECT_EQ(ResidentBytes(map.data(), map.size(), 100, 3 * kMinPage, false, vec, all),
            map.data() + 100);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(ResidentBytes(map.data(), map.size(), 100, 3 * kMinPage, false, vec, one_missing),
            nullptr);
  // Past the mapping's end: refused before mincore, even when always resident.
  EXPECT_EQ(ResidentBytes(map.data(), map.size(), 4 * kMinPage, kMinPage + 1, true, vec, all),
            nullptr);
  EXPECT_EQ(ResidentBytes(map.data(), map.size(), map.size() + 1, 1, true, vec, all), nullptr);
  EXPECT_EQ(calls, 1);
  // Always resident: no mincore.
  EXPECT_EQ(ResidentBytes(map.data(), map.size(), 0, map.size(), true, vec, all), map.data());
  EXPECT_EQ(calls, 1);
}

TEST(ReuseTrust, NotBeforeTheFirstCheck) {
  ReuseTrust t(kCheck, kPause);
  EXPECT_FALSE(t.Trusted(0));
  ASSERT_TRUE(t.CheckDue(0));
  t.Checked(0, 7);  // a baseline: the faults before it are not counted against trust
  EXPECT_TRUE(t.Trusted(0));
}

TEST(ReuseTrust, OneCheckPerPeriod) {
  ReuseTrust t(kCheck, kPause);
  EXPECT_TRUE(t.CheckDue(10));
  EXPECT_FALSE(t.CheckDue(10));
  EXPECT_FALSE(t.CheckDue(109));
  EXPECT_TRUE(t.CheckDue(110));
  EXPECT_FALSE(t.CheckDue(150));
}

TEST(ReuseTrust, AMajorFaultPausesTrust) {
  ReuseTrust t(kCheck, kPause);
  t.Checked(0, 5);
  t.Checked(100, 5);
  EXPECT_TRUE(t.Trusted(100));
  t.Checked(200, 6);  // pages are being evicted: check every page again for kPause
  EXPECT_FALSE(t.Trusted(200));
  EXPECT_FALSE(t.Trusted(200 + kPause - 1));
  EXPECT_TRUE(t.Trusted(200 + kPause));
  t.Checked(300, 6);  // no new fault: the pause runs its course
  EXPECT_FALSE(t.Trusted(300));
  EXPECT_TRUE(t.Trusted(200 + kPause));
}

TEST(ReuseTrust, AForkChildsCountStartsOver) {
  ReuseTrust t(kCheck, kPause);
  t.Checked(0, 500);
  t.Checked(100, 2);  // fewer faults than before: a new process's count, not a fault
  EXPECT_TRUE(t.Trusted(100));
  t.Checked(200, 3);
  EXPECT_FALSE(t.Trusted(200));
}

TEST(ReuseTrust, AnUnknownCountPauses) {
  ReuseTrust t(kCheck, kPause);
  t.Checked(0, 1);
  t.Checked(100, -1);
  EXPECT_FALSE(t.Trusted(100 + kPause - 1));
  t.Checked(200, 1);
  EXPECT_TRUE(t.Trusted(100 + kPause));
}

TEST(ReuseTrust, ThreadsRacingForTheCheckRunItOncePerPeriod) {
  ReuseTrust t(kCheck, kPause);
  std::mutex mu;
  std::vector<int64_t> wins;
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&] {
      for (int64_t now = 0; now < 10 * kCheck; ++now)
        if (t.CheckDue(now)) {
          std::lock_guard<std::mutex> lock(mu);
          wins.push_back(now);
        }
    });
  for (auto& th : threads) th.join();
  // Every thread walks the same clock: no two checks within one period, and none skipped
  // (a winner goes on to the next due time itself, so the last check is in the last period).
  std::sort(wins.begin(), wins.end());
  ASSERT_FALSE(wins.empty());
  EXPECT_EQ(wins.front(), 0);
  for (size_t i = 1; i < wins.size(); ++i) EXPECT_GE(wins[i] - wins[i - 1], kCheck) << i;
  EXPECT_GE(wins.back(), 9 * kCheck);
}

}  // namespace
}  // namespace fanstore::io
