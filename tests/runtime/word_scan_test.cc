// The prefilter's word-at-a-time scans (runtime/names/word_scan.h) against byte-by-byte
// references, on random paths at every alignment, and with the string's NUL at the end of
// a page followed by an inaccessible one (an aligned word never crosses it).
#include "runtime/names/word_scan.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <string>
#include <string_view>

#include "runtime/names/mount_ways.h"

namespace fanstore::runtime {
namespace {

// Just past the first ".." component, or npos.
size_t DotDotReference(std::string_view p) {
  for (size_t i = 0; i < p.size();) {
    while (i < p.size() && p[i] == '/') ++i;
    const size_t b = i;
    while (i < p.size() && p[i] != '/') ++i;
    if (p.substr(b, i - b) == "..") return i;
  }
  return std::string_view::npos;
}

std::string RandomPath(std::mt19937& rng) {
  static const char* const parts[] = {"..",  ".",   ".cache", "data",     "x",         "...",
                                      "..x", "a.b", "x..",    "imagenet", "n01440764", ".."};
  std::string p = rng() % 2 ? "/" : "";
  const unsigned n = rng() % 9;
  for (unsigned k = 0; k < n; ++k) {
    p += parts[rng() % std::size(parts)];
    p += std::string(1 + rng() % 2 * (rng() % 3), '/');  // "/" mostly, "//" or "///" sometimes
  }
  if (!p.empty() && rng() % 2) p.pop_back();  // with or without a trailing slash
  return p;
}

TEST(WordScan, FindsTheFirstDotDotAtEveryAlignment) {
  std::mt19937 rng(7);
  alignas(8) char buf[256];
  for (int trial = 0; trial < 20000; ++trial) {
    const std::string p = RandomPath(rng);
    const size_t at = rng() % 16;
    std::memset(buf, rng() % 2 ? '.' : '/', sizeof buf);  // what lies around must not count
    std::memcpy(buf + at, p.c_str(), p.size() + 1);
    const char* got = FindDotDot(buf + at);
    const size_t want = DotDotReference(p);
    ASSERT_EQ(got ? static_cast<size_t>(got - (buf + at)) : std::string_view::npos, want)
        << "'" << p << "' at " << at;
    ASSERT_EQ(WordStrlen(buf + at), p.size()) << "'" << p << "' at " << at;
  }
}

// Whether some component of p starts with '.'.
bool DotNameReference(std::string_view p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] == '.' && (i == 0 || p[i - 1] == '/')) return true;
  return false;
}

TEST(WordScan, MeasuresAndSpotsDotNamesAtEveryAlignment) {
  std::mt19937 rng(11);
  alignas(8) char buf[256];
  int plain = 0, dotted = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    const std::string p = RandomPath(rng);
    const size_t at = rng() % 16;
    std::memset(buf, rng() % 2 ? '.' : '/', sizeof buf);  // what lies around must not count
    std::memcpy(buf + at, p.c_str(), p.size() + 1);
    size_t len = ~size_t{0}, slash = ~size_t{0};
    const bool got = WordStrlenNoDotName(buf + at, &len, &slash);
    ASSERT_EQ(got, !DotNameReference(p)) << "'" << p << "' at " << at;
    if (got) {
      ASSERT_EQ(len, p.size()) << "'" << p << "' at " << at;
      if (p[0] == '/') {
        ASSERT_EQ(slash, p.rfind('/')) << "'" << p << "' at " << at;
      }
    }
    (got ? plain : dotted)++;
  }
  EXPECT_GT(plain, 1000);  // both answers were exercised
  EXPECT_GT(dotted, 1000);
}

TEST(WordScan, StopsAtTheNulBeforeAnInaccessiblePage) {
  const long page = ::sysconf(_SC_PAGESIZE);
  auto* mem = static_cast<char*>(
      ::mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(mem, MAP_FAILED);
  ASSERT_EQ(::mprotect(mem + page, page, PROT_NONE), 0);
  for (const std::string p :
       {"", "/", "..", "/a/..", "/a/.", "/a/..x", "a/b/../imagenet", "/.cache/."}) {
    char* s = mem + page - p.size() - 1;
    std::memcpy(s, p.c_str(), p.size() + 1);
    const char* got = FindDotDot(s);
    EXPECT_EQ(got ? static_cast<size_t>(got - s) : std::string_view::npos, DotDotReference(p)) << p;
    EXPECT_EQ(WordStrlen(s), p.size()) << p;
    size_t len = 0, slash = 0;
    EXPECT_EQ(WordStrlenNoDotName(s, &len, &slash), !DotNameReference(p)) << p;
  }
  ::munmap(mem, 2 * page);
}

// The prefilter's test for "a '..' then one of the mount point's names" (a C string, no
// library calls) lets through every path the hook's own test (mount_ways.h
// DotDotBeforeName, on string_views) takes, and no other: a path the prefilter refused would
// never reach the hook, and one it let through in vain would cost a walk.
TEST(WordScan, DotDotThenNameAgreesWithTheHooksTest) {
  struct Spelling {
    const char* path;
    unsigned len;
  };
  const Spelling spellings[] = {{"/repo/data/imagenet", 19}, {"/mnt/x", 6}, {"", 0}};
  auto is_name = [&](std::string_view c) {
    for (const Spelling& s : spellings)
      if (IsComponentOf(c, std::string_view(s.path, s.len))) return true;
    return false;
  };
  std::mt19937 rng(11);
  alignas(8) char buf[256];
  int taken = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    const std::string p = RandomPath(rng);
    const size_t at = rng() % 16;
    std::memset(buf, '.', sizeof buf);
    std::memcpy(buf + at, p.c_str(), p.size() + 1);
    const bool hook = DotDotBeforeName(p, is_name) != 0;
    ASSERT_EQ(DotDotThenName(spellings, 3, buf + at), hook) << "'" << p << "' at " << at;
    taken += hook;
  }
  EXPECT_GT(taken, 1000);  // both answers are seen often (the paths are not all one kind)
  EXPECT_LT(taken, 19000);
  // Names that are a spelling's component's prefix or extension, or a whole spelling's
  // text, are not components.
  for (const char* p : {"../dat", "../data2", "../repo/data/imagenetx", "a/../imagenet", "../m",
                        "../mnt", "x/../../x/"}) {
    EXPECT_EQ(DotDotThenName(spellings, 3, p), DotDotBeforeName(p, is_name) != 0) << p;
  }
}

}  // namespace
}  // namespace fanstore::runtime
