#include "bin/stage_decision.h"

#include <cstdio>

#include "bin/cli_util.h"

namespace fanstore::fanrun {

const char* SharedFsName(long t) {
  switch (static_cast<unsigned long>(t) & 0xFFFFFFFFul) {
    case 0x6969:
      return "NFS";
    case 0x0BD00BD0:
      return "Lustre";
    case 0x47504653:
      return "GPFS";
    case 0x19830326:
      return "BeeGFS";
    case 0x00C36400:
      return "CephFS";
    case 0x65735546:
      return "FUSE";  // MooseFS, JuiceFS, s3fs, sshfs, squashfuse, ...
    case 0x517B:
      return "SMB";
    case 0xFF534D42:
      return "CIFS";
    case 0xFE534D42:
      return "SMB2";
    case 0x5346414F:
      return "AFS";
    case 0x01021997:
      return "9P";
    case 0x7461636F:
      return "OCFS2";
    case 0x01161970:
      return "GFS2";
    case 0x013111A8:
      return "IBRIX";
    case 0xAAD7AAEA:
      return "PanFS";
    default:
      return nullptr;
  }
}

const char* LocalFsName(long t) {
  switch (static_cast<unsigned long>(t) & 0xFFFFFFFFul) {
    case 0xEF53:
      return "ext4";
    case 0x58465342:
      return "XFS";
    case 0x9123683E:
      return "Btrfs";
    case 0x01021994:
      return "tmpfs";
    case 0x2FC12FC1:
      return "ZFS";
    case 0x794C7630:
      return "overlay";
    case 0xF2F52010:
      return "F2FS";
    case 0x858458F6:
      return "ramfs";
    default:
      return nullptr;
  }
}

namespace {

constexpr long kTmpfs = 0x01021994;

StageDecision DecideCopy(const StageInputs& in) {
  StageDecision d;
  if (in.no_stage_flag) {
    d.why = "--no-stage";
    return d;
  }
  if (in.nodes > 1) {
    // (local before the namespace exchange unless --stage asks for the copy while CMD runs:
    // with two ranks on two cores, reading from MooseFS, the overlap took 0.8-1.0x the time
    // and pulled up to 1.1x the bytes, where the share made local first pulls them once
    // exactly: docs/performance.md)
    d.stage = true;
    d.overlap = in.stage_flag;
    d.why = std::to_string(in.nodes) + " nodes" + (in.stage_flag ? ", --stage" : "");
    return d;
  }
  if (in.stage_flag || in.local_dir_given) {
    d.stage = d.overlap = true;
    d.why = in.stage_flag ? "--stage" : "--local-dir";
    return d;
  }
  const char* shared = SharedFsName(in.data_fs_type);
  if (!shared) {
    const char* local = LocalFsName(in.data_fs_type);
    char type[32];
    std::snprintf(type, sizeof type, "type 0x%lx",
                  static_cast<unsigned long>(in.data_fs_type) & 0xFFFFFFFFul);
    d.why = std::string("DATA is on a local file system (") + (local ? local : type) + ")";
    // (DATA on tmpfs is in memory already: a copy gains nothing)
    if (in.shmem_huge && in.data_fs_type != kTmpfs && in.share_bytes > 0 &&
        in.share_bytes <= in.mem_available / 2 && in.share_bytes <= in.local_free) {
      d.stage = d.overlap = true;
      d.why += ", and a copy in huge pages in " + in.local_where +
               " reads faster than its page cache (--no-stage: in place)";
    }
    return d;
  }
  std::string short_of;  // why the copy cannot go where copies go by default
  if (in.share_bytes > in.local_free)
    short_of = in.local_where + " has " + cli::HumanBytes(static_cast<double>(in.local_free)) +
               " free for " + cli::HumanBytes(static_cast<double>(in.share_bytes));
  // (a copy in tmpfs is memory charged to the job: over half of what the job may use, it
  // would crowd out the training itself, or be killed by the job's cgroup)
  else if (in.local_is_memory && in.mem_available > 0 && in.share_bytes > in.mem_available / 2)
    short_of = "a copy of " + cli::HumanBytes(static_cast<double>(in.share_bytes)) + " in " +
               in.local_where + " would take over half of the " +
               cli::HumanBytes(static_cast<double>(in.mem_available)) +
               " of memory this job may use";
  if (!short_of.empty() && !in.disk_where.empty() && in.share_bytes <= in.disk_free) {
    d.stage = d.overlap = true;
    d.local_dir = in.disk_where;
    d.why = std::string("DATA is on ") + shared + "; " + short_of + ", so the copy goes to " +
            in.disk_where + ", a local disk";
    return d;
  }
  if (!short_of.empty()) {
    d.why = std::string("DATA is on ") + shared + ", but " + short_of +
            " (give --local-dir on a larger local disk)";
    return d;
  }
  d.stage = d.overlap = true;
  d.why = std::string("DATA is on ") + shared;
  return d;
}

}  // namespace

StageDecision DecideStaging(const StageInputs& in) {
  StageDecision d = DecideCopy(in);
  // Under a launcher (one rank too, as several) the share is local before CMD unless
  // --stage: from a shared file system read once into the page cache and checked there, the
  // copy made while CMD runs (reading the share straight into the copy's fresh huge pages put
  // their allocation on the start-up's path: two ranks, 246 MB on MooseFS, 0.85-1.57 s
  // against 0.57-0.66 s for one `cat` of it); from a local disk copied first.
  if (in.launched && d.stage && !in.stage_flag) {
    d.overlap = false;
    d.fetch_first = SharedFsName(in.data_fs_type) != nullptr;
  }
  // (DATA on tmpfs is always in memory: nothing to read in)
  d.warm = !d.stage && !SharedFsName(in.data_fs_type) && in.data_fs_type != kTmpfs &&
           in.share_bytes > 0 && in.share_bytes <= in.mem_available / 2;
  d.yield = !in.launched && (d.overlap || d.warm) && !SharedFsName(in.data_fs_type);
  if (d.yield && !in.stage_flag && !in.local_dir_given) d.start_after_s = kOwnCopyAfterS;
  return d;
}

}  // namespace fanstore::fanrun
