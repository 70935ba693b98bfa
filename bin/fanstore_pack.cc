#include <cstdio>

#include "bin/cli_util.h"
#include "bin/fanstore_commands.h"

namespace fanstore::tool {

int Pack(const meta::PackOptions& in, bool quiet) {
  meta::PackOptions o = in;
  cli::ProgressBar bar;
  o.warn = [&](const std::string& w) {
    bar.Finish();
    cli::Error("fanstore", "warning: " + w);
  };
  o.progress = [&](const meta::PackProgress& p) {
    if (!quiet) bar.Update(p.files_done, p.files_total, p.bytes_done, p.bytes_total);
  };
  auto r = meta::Pack(o);
  bar.Finish();
  if (!r.ok()) {
    cli::Error("fanstore", "pack: " + r.status().message());
    return cli::kExitFailure;
  }
  const meta::PackStats& s = *r;
  if (!s.restricted_member.empty()) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", s.restricted_mode & 07777);
    const std::string what = "'" + s.restricted_member + "' (mode " + mode + ")";
    if (s.private_output)
      cli::Error("fanstore", "pack: not every member is readable by everyone (first: " + what +
                                 "), so " + o.out +
                                 " is readable by you only (0700, files 0600); "
                                 "--public makes it readable by all");
    else
      cli::Error("fanstore", "warning: --public: " + o.out +
                                 " is readable by all, and so are "
                                 "the bytes of members that are not, such as " +
                                 what);
  }
  if (s.partitions_asked > s.sharded)
    cli::Error("fanstore", "pack: --partitions " + std::to_string(s.partitions_asked) +
                               ": the data fills only " + std::to_string(s.sharded) +
                               " (each partition holds at least one non-empty file)");
  if (!quiet) {
    const std::string parts =
        s.partitions > s.sharded
            ? std::to_string(s.partitions) + " partitions (" + std::to_string(s.sharded) +
                  " sharded + 1 broadcast)"
            : std::to_string(s.partitions) + " partition" + (s.partitions == 1 ? "" : "s");
    std::printf(
        "packed %llu files, %llu dirs, %llu symlinks (%llu skipped) into %s: "
        "%s in, %s stored (ratio %.3f, %llu compressed), %.2f s, %s/s\n",
        static_cast<unsigned long long>(s.files), static_cast<unsigned long long>(s.dirs),
        static_cast<unsigned long long>(s.symlinks), static_cast<unsigned long long>(s.skipped),
        parts.c_str(), cli::HumanBytes(s.bytes_in).c_str(), cli::HumanBytes(s.bytes_stored).c_str(),
        s.bytes_in ? static_cast<double>(s.bytes_stored) / s.bytes_in : 1.0,
        static_cast<unsigned long long>(s.compressed_members), s.seconds,
        cli::HumanBytes(s.seconds > 0 ? s.bytes_in / s.seconds : 0).c_str());
  }
  return cli::kExitOk;
}

}  // namespace fanstore::tool
