#include "meta/archive_sources.h"

#include <glob.h>

#include <algorithm>
#include <cstring>

#include "meta/pack_plan.h"

namespace fanstore::meta {
namespace archive_pack {
namespace {

// The archive suffixes, longest first; a name ending so is an archive of that kind.
// The archive suffixes, longest first; a name ending so is an archive of that kind.
constexpr const char* kTarSuffixes[] = {".tar.gz", ".tar.zst", ".tar.xz", ".tgz",
                                        ".tzst",   ".txz",     ".tar"};

}  // namespace

std::string StripArchiveSuffix(const std::string& name) {
  for (const char* s : kTarSuffixes) {
    const size_t n = std::strlen(s);
    if (name.size() > n && name.compare(name.size() - n, n, s) == 0)
      return name.substr(0, name.size() - n);
  }
  if (name.size() > 4 && name.compare(name.size() - 4, 4, ".zip") == 0)
    return name.substr(0, name.size() - 4);
  return name;
}

bool HasTarSuffix(const std::string& name) {
  for (const char* s : kTarSuffixes) {
    const size_t n = std::strlen(s);
    if (name.size() > n && name.compare(name.size() - n, n, s) == 0) return true;
  }
  return false;
}

Status ExpandBraces(const std::string& p, std::vector<std::string>& out) {
  const size_t open = p.find('{');
  const size_t dots = open == std::string::npos ? open : p.find("..", open);
  const size_t close = dots == std::string::npos ? dots : p.find('}', dots);
  if (close == std::string::npos) {
    out.push_back(p);
    return Status::Ok();
  }
  const std::string a = p.substr(open + 1, dots - open - 1);
  const std::string b = p.substr(dots + 2, close - dots - 2);
  auto number = [](const std::string& s, uint64_t* v) {
    if (s.empty() || s.size() > 18) return false;
    for (char c : s)
      if (c < '0' || c > '9') return false;
    *v = std::stoull(s);
    return true;
  };
  uint64_t lo, hi;
  if (!number(a, &lo) || !number(b, &hi)) {
    out.push_back(p);  // not a numeric range: left for the glob
    return Status::Ok();
  }
  if (hi < lo || hi - lo > 10'000'000)
    return Status::Error(p + ": the range {" + a + ".." + b + "} is empty or too large");
  const size_t width = a.size() > 1 && a[0] == '0' ? a.size() : 0;
  for (uint64_t v = lo; v <= hi; ++v) {
    std::string n = std::to_string(v);
    if (n.size() < width) n.insert(0, width - n.size(), '0');
    FANSTORE_RETURN_IF_ERROR(ExpandBraces(p.substr(0, open) + n + p.substr(close + 1), out));
  }
  return Status::Ok();
}

std::vector<Group> MakeGroups(const std::vector<std::string>& sources,
                              const std::vector<uint64_t>& sizes, const PackOptions& o) {
  uint64_t total = 0;
  for (uint64_t b : sizes) total += b;
  std::vector<Group> groups;
  if (!o.broadcast.empty()) {
    Group g;
    g.sources = sources;
    g.bytes = total;
    g.cap = o.partitions ? o.partitions : kMaxShardedPartitions;
    g.target = o.partitions ? std::max<uint64_t>(1, (total + o.partitions - 1) / o.partitions)
                            : kDefaultPartitionBytes;
    groups.push_back(g);
    return groups;
  }
  if (o.partitions) {
    const uint64_t n = std::min<uint64_t>(o.partitions, sources.size());
    std::vector<Group> runs(n);
    uint64_t before = 0;
    for (size_t k = 0; k < sources.size(); ++k) {
      const uint64_t g =
          total ? std::min<uint64_t>(
                      n - 1, static_cast<uint64_t>(
                                 (static_cast<long double>(before) + sizes[k] / 2.0) * n / total))
                : k * n / sources.size();
      runs[g].sources.push_back(sources[k]);
      runs[g].bytes += sizes[k];
      before += sizes[k];
    }
    for (Group& g : runs)
      if (!g.sources.empty()) groups.push_back(std::move(g));
    // At least one partition each; the rest by the largest remainder of their share.
    uint32_t left = o.partitions - static_cast<uint32_t>(groups.size());
    std::vector<std::pair<long double, size_t>> rem;
    uint32_t given = 0;
    for (size_t i = 0; i < groups.size(); ++i) {
      const long double share = total ? static_cast<long double>(left) * groups[i].bytes / total
                                      : static_cast<long double>(left) / groups.size();
      const uint32_t whole = static_cast<uint32_t>(share);
      groups[i].cap = 1 + whole;
      given += whole;
      rem.emplace_back(share - whole, i);
    }
    std::stable_sort(rem.begin(), rem.end(), [](auto& a, auto& b) { return a.first > b.first; });
    for (size_t i = 0; given < left; ++i, ++given) ++groups[rem[i % rem.size()].second].cap;
    for (Group& g : groups) g.target = std::max<uint64_t>(1, (g.bytes + g.cap - 1) / g.cap);
    return groups;
  }
  for (size_t k = 0; k < sources.size(); ++k) {
    if (groups.empty() || groups.back().bytes >= kDefaultPartitionBytes) groups.emplace_back();
    groups.back().sources.push_back(sources[k]);
    groups.back().bytes += sizes[k];
  }
  for (Group& g : groups) {
    g.cap = kMaxShardedPartitions;
    g.target = kDefaultPartitionBytes;
  }
  return groups;
}

}  // namespace archive_pack

Result<std::vector<std::string>> ExpandSources(const std::vector<std::string>& patterns) {
  std::vector<std::string> out;
  for (const std::string& pat : patterns) {
    std::vector<std::string> braced;
    FANSTORE_RETURN_IF_ERROR(archive_pack::ExpandBraces(pat, braced));
    for (const std::string& p : braced) {
      if (p.find_first_of("*?[") == std::string::npos) {
        out.push_back(p);
        continue;
      }
      glob_t g{};
      const int rc = ::glob(p.c_str(), 0, nullptr, &g);
      if (rc == GLOB_NOMATCH) {
        ::globfree(&g);
        return Status::Error(p + ": matches no file");
      }
      if (rc != 0) {
        ::globfree(&g);
        return Status::Error(p + ": cannot expand the pattern");
      }
      for (size_t i = 0; i < g.gl_pathc; ++i) out.push_back(g.gl_pathv[i]);
      ::globfree(&g);
    }
  }
  return out;
}

}  // namespace fanstore::meta
