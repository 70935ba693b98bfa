#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

#include "bin/cli_util.h"
#include "bin/fanstore_commands.h"
#include "meta/access.h"
#include "meta/dataset.h"
#include "meta/exchange.h"
#include "meta/namespace_image.h"

namespace fanstore::tool {
namespace {

using meta::Dataset;
using meta::MemberRef;
using meta::MemberView;

std::unique_ptr<Dataset> OpenOrReport(const std::string& data) {
  auto ds = Dataset::Open(data);
  if (!ds.ok()) {
    cli::Error("fanstore", ds.status().message());
    return nullptr;
  }
  return std::move(ds.value());
}

void PrintEntry(const MemberView& v, std::string_view name, bool long_format) {
  if (!long_format) {
    std::printf("%.*s\n", static_cast<int>(name.size()), name.data());
    return;
  }
  std::printf("%s %5u %5u %12llu %s %.*s", cli::ModeString(v.rec.mode).c_str(), v.rec.uid,
              v.rec.gid, static_cast<unsigned long long>(v.rec.size),
              cli::TimeString(v.rec.mtime_ns).c_str(), static_cast<int>(name.size()), name.data());
  if (v.kind() == meta::Kind::kSymlink)
    std::printf(" -> %.*s", static_cast<int>(v.target.size()), v.target.data());
  std::printf("\n");
}

bool WriteAll(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

std::string Display(std::string_view path) {
  return path.empty() ? "/" : std::string(path);
}

// A name as `ls` shows it on a terminal: control bytes (a newline, an escape sequence)
// become '?', so a dataset's names cannot move the cursor or forge lines. Anywhere else
// the bytes go out as they are, as coreutils does.
std::string ForTerminal(std::string_view name) {
  static const bool tty = ::isatty(STDOUT_FILENO);
  std::string out(name);
  if (tty)
    for (char& c : out)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return out;
}

// Whether this process may `want` (meta::kMay*) on the member at `path` (a path of the
// dataset, symlinks resolved) and search every directory above it, by the members' modes
// as the kernel would judge them under fanrun: reading OUT's files is not enough.
bool CallerMay(const Dataset& ds, std::string_view path, unsigned want) {
  std::vector<gid_t> groups(static_cast<size_t>(std::max(0, ::getgroups(0, nullptr))));
  const int n = ::getgroups(static_cast<int>(groups.size()), groups.data());
  static_assert(sizeof(gid_t) == sizeof(uint32_t));
  const meta::Credentials c{::geteuid(), ::getegid(),
                            reinterpret_cast<const uint32_t*>(groups.data()), std::max(0, n)};
  const auto may = [&](std::string_view p, unsigned w) {
    const MemberRef* r = ds.Resolve(p, false);
    if (!r) return true;  // (reported as missing by the caller)
    const MemberView v = ds.View(*r);
    return meta::MayAccess(c, v.rec.mode, v.rec.uid, v.rec.gid, w);
  };
  if (want && !may(path, want)) return false;
  for (std::string_view p = path; !p.empty();) {
    p = meta::ParentPath(p);
    if (!may(p, meta::kMayExec)) return false;
  }
  return true;
}

int Denied(const char* cmd, const std::string& path) {
  cli::Error("fanstore", std::string(cmd) + ": " + path + ": " + std::strerror(EACCES));
  return cli::kExitFailure;
}

// A member's path as the user typed it, as a path of the dataset: the absolute path it had
// when packed (below the manifest's source), or relative to the root with or without a
// leading '/'.
std::string MemberPath(const Dataset& ds, std::string_view typed) {
  const std::string& source = ds.manifest().source;
  if (source.size() > 1 && typed.substr(0, source.size()) == source &&
      (typed.size() == source.size() || typed[source.size()] == '/'))
    typed.remove_prefix(source.size());
  while (!typed.empty() && typed.front() == '/') typed.remove_prefix(1);
  while (!typed.empty() && typed.back() == '/') typed.remove_suffix(1);
  return std::string(typed);
}

}  // namespace

int Ls(const std::string& data, const std::string& path, bool long_format, bool recursive) {
  auto ds = OpenOrReport(data);
  if (!ds) return cli::kExitFailure;
  const std::string member = MemberPath(*ds, path);
  const MemberRef* ref = ds->Resolve(member, /*follow_last=*/true);
  if (!ref) ref = ds->Resolve(member, false);
  if (!ref) {
    cli::Error("fanstore", "ls: " + path + ": no such file or directory in " + data);
    return cli::kExitFailure;
  }
  const MemberView top = ds->View(*ref);
  if (!CallerMay(*ds, top.path, top.kind() == meta::Kind::kDir ? meta::kMayRead : 0))
    return Denied("ls", path);
  if (top.kind() != meta::Kind::kDir) {
    PrintEntry(top, ForTerminal(top.path), long_format);
    return cli::kExitOk;
  }
  bool denied = false;
  std::function<void(std::string_view, bool)> list = [&](std::string_view dir, bool header) {
    if (header) std::printf("%s:\n", ForTerminal(Display(dir)).c_str());
    const auto& kids = ds->Children(dir);
    for (const MemberRef& k : kids) {
      const MemberView v = ds->View(k);
      PrintEntry(v, ForTerminal(meta::BaseName(v.path)), long_format);
    }
    if (!recursive) return;
    for (const MemberRef& k : kids) {
      const MemberView v = ds->View(k);
      if (v.kind() != meta::Kind::kDir) continue;
      std::printf("\n");
      if (!CallerMay(*ds, v.path, meta::kMayRead)) {
        std::fflush(stdout);
        denied = true;
        Denied("ls", Display(v.path));
        continue;
      }
      list(v.path, true);
    }
  };
  list(top.path, recursive);
  return std::fflush(stdout) == 0 && !denied ? cli::kExitOk : cli::kExitFailure;
}

int Stat(const std::string& data, const std::string& path) {
  auto ds = OpenOrReport(data);
  if (!ds) return cli::kExitFailure;
  const MemberRef* ref = ds->Resolve(MemberPath(*ds, path), /*follow_last=*/false);
  if (!ref) {
    cli::Error("fanstore", "stat: " + path + ": no such file or directory in " + data);
    return cli::kExitFailure;
  }
  const MemberView v = ds->View(*ref);
  if (!CallerMay(*ds, v.path, 0)) return Denied("stat", path);
  std::printf(
      "      Path: %s\n      Type: %s\n      Mode: %04o (%s)\n       Uid: %u\n"
      "       Gid: %u\n      Size: %llu\n    Modify: %s\n",
      ForTerminal(Display(v.path)).c_str(), meta::KindName(v.kind()), v.rec.mode & 07777,
      cli::ModeString(v.rec.mode).c_str(), v.rec.uid, v.rec.gid,
      static_cast<unsigned long long>(v.rec.size), cli::TimeString(v.rec.mtime_ns).c_str());
  if (v.kind() == meta::Kind::kSymlink)
    std::printf("    Target: %.*s\n", static_cast<int>(v.target.size()), v.target.data());
  if (v.kind() == meta::Kind::kFile)
    std::printf(" Partition: %s\n    Offset: %llu\n    Stored: %llu (%s)\n    CRC32C: %08x\n",
                meta::PartitionFileName(ref->partition).c_str(),
                static_cast<unsigned long long>(v.rec.data_offset),
                static_cast<unsigned long long>(v.rec.stored_size), meta::CodecName(v.codec()),
                v.rec.crc32c);
  else
    std::printf(" Partition: %s\n", meta::PartitionFileName(ref->partition).c_str());
  return cli::kExitOk;
}

int Cat(const std::string& data, const std::string& path) {
  auto ds = OpenOrReport(data);
  if (!ds) return cli::kExitFailure;
  const MemberRef* ref = ds->Resolve(MemberPath(*ds, path), /*follow_last=*/true);
  if (!ref) {
    cli::Error("fanstore", "cat: " + path + ": no such file in " + data);
    return cli::kExitFailure;
  }
  const MemberView v = ds->View(*ref);
  if (v.kind() == meta::Kind::kDir) {
    cli::Error("fanstore", "cat: " + path + ": is a directory");
    return cli::kExitFailure;
  }
  if (!CallerMay(*ds, v.path, meta::kMayRead)) return Denied("cat", path);
  // Nothing is written unless every byte checks out: a member up to kBuffered is read
  // whole first; a larger one is read (inflated, checksummed) once to check it, then again
  // to write it.
  constexpr uint64_t kBuffered = 256ull << 20;
  std::string whole;
  if (v.rec.size <= kBuffered) {
    whole.reserve(v.rec.size);
  } else if (const Status check =
                 ds->ReadMember(*ref, [](std::span<const uint8_t>) { return true; });
             !check.ok()) {
    cli::Error("fanstore", "cat: " + check.message());
    return cli::kExitFailure;
  }
  bool write_failed = false;
  const Status s = ds->ReadMember(*ref, [&](std::span<const uint8_t> b) {
    if (v.rec.size <= kBuffered) {
      whole.append(reinterpret_cast<const char*>(b.data()), b.size());
      return true;
    }
    write_failed = !WriteAll(STDOUT_FILENO, b.data(), b.size());
    return !write_failed;
  });
  if (s.ok() && v.rec.size <= kBuffered)
    write_failed =
        !WriteAll(STDOUT_FILENO, reinterpret_cast<const uint8_t*>(whole.data()), whole.size());
  if (write_failed) {
    cli::Error("fanstore", std::string("cat: standard output: ") + std::strerror(errno));
    return cli::kExitFailure;
  }
  if (!s.ok()) {
    cli::Error("fanstore", "cat: " + s.message());
    return cli::kExitFailure;
  }
  return cli::kExitOk;
}

int Verify(const std::string& data, bool quiet) {
  auto m = meta::Manifest::Load(data);
  if (!m.ok()) {
    cli::Error("fanstore", "verify: " + m.status().message());
    return cli::kExitFailure;
  }
  uint64_t members = 0, damaged = 0, bad_parts = 0, files = 0, symlinks = 0;
  std::string wire;  // every partition's members, as fanrun's ranks exchange them
  for (uint32_t p = 0; p < m->partitions.size(); ++p) {
    meta::PartitionReader r;
    Status s = r.Open(data + "/" + meta::PartitionFileName(p));
    if (s.ok()) s = meta::CheckAgainstManifest(r, *m, p);
    if (!s.ok()) {
      cli::Error("fanstore", "verify: " + s.message());
      ++bad_parts;
      continue;
    }
    uint64_t part_damaged = 0;
    meta::EncodeMembers(r, p, &wire);
    for (size_t i = 0; i < r.size(); ++i) {
      ++members;
      if (r.member(i).kind() == meta::Kind::kDir) continue;
      ++(r.member(i).kind() == meta::Kind::kFile ? files : symlinks);
      s = r.ReadMember(i, [](std::span<const uint8_t>) { return true; });
      if (!s.ok()) {
        cli::Error("fanstore", "verify: " + s.message());
        ++part_damaged;
      }
    }
    damaged += part_damaged;
    if (part_damaged) ++bad_parts;
    if (!quiet)
      std::printf("%s %s: %zu members\n", part_damaged ? "DAMAGED" : "ok     ",
                  meta::PartitionFileName(p).c_str(), r.size());
  }
  // The namespace fanrun would build from them: one root, every member's parent a
  // directory, no path in two partitions, and the manifest's totals.
  bool bad_namespace = false;
  if (bad_parts == 0) {
    auto image = meta::BuildNamespaceImage(wire, std::vector<std::string>(m->partitions.size(), ""),
                                           m->dataset_id);
    std::string why;
    if (!image.ok()) {
      why = image.status().message();
    } else if (auto v = meta::NamespaceView::Attach(
                   {reinterpret_cast<const uint8_t*>(image->data()), image->size()});
               !v.ok()) {
      why = v.status().message();
    } else if (m->files != files || m->symlinks != symlinks ||
               m->dirs != v->size() - files - symlinks) {
      why = "manifest: its counts of files, dirs and symlinks differ from the partitions'";
    }
    if (!why.empty()) {
      cli::Error("fanstore", "verify: " + why);
      bad_namespace = true;
    } else if (!quiet) {
      std::printf("ok      namespace: %llu entries\n",
                  static_cast<unsigned long long>(files + symlinks + m->dirs));
    }
  }
  std::printf(
      "verified %llu members in %zu partitions: %llu damaged members, %llu bad partitions%s\n",
      static_cast<unsigned long long>(members), m->partitions.size(),
      static_cast<unsigned long long>(damaged), static_cast<unsigned long long>(bad_parts),
      bad_namespace ? ", a bad namespace" : "");
  return damaged || bad_parts || bad_namespace ? cli::kExitFailure : cli::kExitOk;
}

int Info(const std::string& data, bool json) {
  auto ds = OpenOrReport(data);
  if (!ds) return cli::kExitFailure;
  const meta::Manifest& m = ds->manifest();
  uint64_t total_size = 0;
  for (const auto& p : m.partitions) total_size += p.file_size;
  if (json) {
    std::printf(
        "{\"dataset_id\": \"%016llx\", \"source\": %s, \"compress\": %s, \"files\": %llu, "
        "\"dirs\": %llu, \"symlinks\": %llu, \"bytes\": %llu, \"stored\": %llu, "
        "\"size\": %llu, \"partitions\": [",
        static_cast<unsigned long long>(m.dataset_id), cli::JsonString(m.source).c_str(),
        cli::JsonString(m.compress).c_str(), static_cast<unsigned long long>(m.files),
        static_cast<unsigned long long>(m.dirs), static_cast<unsigned long long>(m.symlinks),
        static_cast<unsigned long long>(m.bytes), static_cast<unsigned long long>(m.stored),
        static_cast<unsigned long long>(total_size));
    for (size_t i = 0; i < m.partitions.size(); ++i) {
      const auto& p = m.partitions[i];
      std::printf(
          "%s{\"id\": %u, \"file\": \"%s\", \"broadcast\": %s, \"members\": %llu, "
          "\"bytes\": %llu, \"stored\": %llu, \"size\": %llu}",
          i ? ", " : "", p.id, meta::PartitionFileName(p.id).c_str(),
          (p.flags & meta::kFlagBroadcast) ? "true" : "false",
          static_cast<unsigned long long>(p.members), static_cast<unsigned long long>(p.bytes),
          static_cast<unsigned long long>(p.stored), static_cast<unsigned long long>(p.file_size));
    }
    std::printf("]}\n");
    return cli::kExitOk;
  }
  std::printf(
      "dataset    %s\ndataset id %016llx\nsource     %s\ncompress   %s\n"
      "files      %llu\ndirs       %llu\nsymlinks   %llu\nbytes      %llu (%s)\n"
      "stored     %llu (%s, ratio %.3f)\non disk    %llu (%s) in %zu partitions\n\n",
      data.c_str(), static_cast<unsigned long long>(m.dataset_id), m.source.c_str(),
      m.compress.c_str(), static_cast<unsigned long long>(m.files),
      static_cast<unsigned long long>(m.dirs), static_cast<unsigned long long>(m.symlinks),
      static_cast<unsigned long long>(m.bytes), cli::HumanBytes(m.bytes).c_str(),
      static_cast<unsigned long long>(m.stored), cli::HumanBytes(m.stored).c_str(),
      m.bytes ? static_cast<double>(m.stored) / m.bytes : 1.0,
      static_cast<unsigned long long>(total_size), cli::HumanBytes(total_size).c_str(),
      m.partitions.size());
  std::printf("%-16s %-9s %10s %14s %14s\n", "partition", "kind", "members", "bytes", "stored");
  for (const auto& p : m.partitions)
    std::printf("%-16s %-9s %10llu %14llu %14llu\n", meta::PartitionFileName(p.id).c_str(),
                (p.flags & meta::kFlagBroadcast) ? "broadcast" : "sharded",
                static_cast<unsigned long long>(p.members),
                static_cast<unsigned long long>(p.bytes),
                static_cast<unsigned long long>(p.stored));
  return cli::kExitOk;
}

}  // namespace fanstore::tool
