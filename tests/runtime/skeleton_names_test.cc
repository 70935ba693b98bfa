// The last component and parent of a path (runtime/paths/skeleton.h ParentSpan, ParentOf), as the
// prefilter's two stages find them: the first stage hashes the parent of an absolute path
// in place, the second copies it, and both must name the same directory.
#include <gtest/gtest.h>

#include <string>

#include "runtime/paths/skeleton.h"

namespace fanstore::runtime {
namespace {

struct Case {
  const char* path;
  const char* parent;  // nullptr: no last component
  const char* name;
};

TEST(SkeletonNames, ParentAndLastComponent) {
  const Case cases[] = {
      {"x", ".", "x"},
      {"x/", ".", "x"},
      {"/x", "/", "x"},
      {"/x//", "/", "x"},
      {"a/x", "a", "x"},
      {"/usr/bin/no-such", "/usr/bin", "no-such"},
      {"/usr/bin//no-such", "/usr/bin/", "no-such"},
      {"/usr/./bin/x/", "/usr/./bin", "x"},
      {"../x", "..", "x"},
      {"", nullptr, nullptr},
      {"/", nullptr, nullptr},
      {"//", nullptr, nullptr},
      {".", nullptr, nullptr},
      {"..", nullptr, nullptr},
      {"/a/..", nullptr, nullptr},
      {"a/./", nullptr, nullptr},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.path);
    char parent[4096];
    LastComponent lc{};
    size_t plen = 0;
    const bool found = ParentOf(c.path, parent, &lc);
    ASSERT_EQ(found, c.parent != nullptr);
    LastComponent span{};
    ASSERT_EQ(ParentSpan(c.path, &plen, &span), found);
    if (!found) continue;
    EXPECT_EQ(std::string(parent), c.parent);
    EXPECT_EQ(std::string(c.path + lc.start, lc.end - lc.start), c.name);
    EXPECT_EQ(plen, std::string(c.parent).size());
    EXPECT_EQ(span.start, lc.start);
    EXPECT_EQ(span.end, lc.end);
    EXPECT_EQ(span.len, std::string(c.path).size());
    // An absolute path's parent is its own prefix: what the first stage hashes in place.
    if (c.path[0] == '/') {
      EXPECT_EQ(std::string(c.path, plen), c.parent);
    }
  }
}

TEST(SkeletonNames, PathOfPathMaxHasNoParent) {
  std::string p(4096, 'a');
  p[0] = '/';
  size_t plen;
  LastComponent lc;
  EXPECT_FALSE(ParentSpan(p.c_str(), &plen, &lc));
  p.resize(4095);
  p[2000] = '/';
  ASSERT_TRUE(ParentSpan(p.c_str(), &plen, &lc));
  EXPECT_EQ(plen, 2000u);
}

}  // namespace
}  // namespace fanstore::runtime
