// The runtime's per-process state: the attached namespace image, the mount point, the
// partition blobs (opened lazily into a reserved fd range at the top of RLIMIT_NOFILE) and
// the process identity used to recognise vfork children.
// Init reads its settings from the environment fanrun sets (runtime/process/env.h).
// Thread-safety: Init from the constructor; afterwards read-only except the atomics (the
// pid, the blobs' fds, mappings, sizes and residency, the in-place fds and their recheck
// times). The virtual cwd is not here: runtime/paths/cwd.cc keeps it (resolve.h, CwdIsVirtual).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "io/landing.h"
#include "meta/namespace_image.h"
#include "runtime/names/fast_key.h"
#include "runtime/process/held_blobs.h"

namespace fanstore::runtime {

// The mount point as given, with its symlinks resolved, and through four symlinks to it.
inline constexpr size_t kMountSpellings = 6;

struct State {
  meta::NamespaceView ns;
  ImageTables tables() const {
    return {ns.entries(), ns.buckets(), ns.bucket_mask(), ns.strings()};
  }
  std::string mount;       // absolute, no trailing '/'
  std::string mount_real;  // its symlinks resolved, if that differs; else ""
  // Symlinks to the mount point, above it or to a directory inside it, found in fanrun's
  // directory at start (FANSTORE_MOUNT_ALIASES), as the mount point spelled through them:
  // /repo/data for a link /repo/data -> /datasets/imagenet mounted there; /repo/train for
  // /repo/train -> /datasets/imagenet/train, with alias_entries[k] its directory's entry
  // (0, the root, for the others). At most four.
  std::vector<std::string> aliases;
  uint32_t alias_entries[4] = {0, 0, 0, 0};
  uint32_t alias_links = 0;  // bit k: alias k's last component is the symlink itself
  // The mount point as the kernel spells it (getcwd, /proc/self/fd links, "..").
  const std::string& physical_mount() const { return mount_real.empty() ? mount : mount_real; }
  // Every spelling a path may take to reach it: mount, then mount_real and the aliases
  // that are set. Allocates nothing (a vfork child's chdir resolves with it).
  struct Spellings {
    std::string_view at[kMountSpellings];
    size_t count = 0;
    size_t first_alias = 0;  // at[first_alias..count): the aliases
    size_t size() const { return count; }
    std::string_view operator[](size_t k) const { return at[k]; }
  };
  Spellings spellings() const {
    Spellings l;
    l.at[l.count++] = mount;
    if (!mount_real.empty()) l.at[l.count++] = mount_real;
    l.first_alias = l.count;
    for (const std::string& a : aliases)
      if (l.count < kMountSpellings) l.at[l.count++] = a;
    return l;
  }
  std::vector<std::string> parts;  // partition blob paths; "" = held by other nodes only
  std::string data;                // FANSTORE_DATA: DATA, for messages ("" = unknown)
  std::string agent;               // the node agent's socket ("" = none)
  std::string node_cache;          // the agent's cache directory (FANSTORE_NODE_CACHE)
  int agent_timeout_ms = 60000;
  bool verify_every_read = false;  // FANSTORE_VERIFY=all: raw members on every read
  bool trust_raw = false;          // FANSTORE_VERIFY=none: raw members never checked
  int64_t readahead = -1;          // FANSTORE_READAHEAD: bytes around a cold member (-1: auto)
  bool mapped_reads = true;   // FANSTORE_MAPPED_READS=0: always read, never copy from a mapping
  std::string stats_target;   // "" | "1" | path
  int stats_fd = -1;          // stats_target "1": a copy of stderr taken at start, in the
                              // reserved range (programs such as cat close fd 2 at exit)
  int reserved_lo = 0;        // runtime fds live in [reserved_lo, soft RLIMIT_NOFILE)
  std::string image_path;     // FANSTORE_IMAGE: the namespace image this process attached
  std::atomic<pid_t> pid{0};  // this process (updated in forked children)
  std::unique_ptr<std::atomic<int>[]> blob_fds;
  // Read-only mappings of the local blobs, made on first use: 0 not yet, 1 unavailable.
  std::unique_ptr<std::atomic<uintptr_t>[]> blob_maps;
  std::unique_ptr<std::atomic<uint64_t>[]> blob_sizes;  // stored before the mapping is published
  std::unique_ptr<std::atomic<bool>[]> blob_resident;   // io::AlwaysResident, stored likewise
  bool staged = false;  // FANSTORE_STAGED=1: the local blobs are fanrun's own staged copies
  // FANSTORE_STAGING_FROM: fanrun is still copying the blobs from this directory (DATA). A
  // copy appears under its final name only once complete and checked; until then the
  // partition is read in place from here (an fd kept in provisional_fds, never mapped),
  // and the copy is looked for again at most every kRecheckNs.
  std::string staging_from;
  std::unique_ptr<std::atomic<int>[]> provisional_fds;
  std::unique_ptr<std::atomic<int64_t>[]> recheck_at_ns;
  static constexpr int64_t kRecheckNs = 200'000'000;
  // The identities of DATA's blobs fanrun holds (runtime/process/held_blobs.h), by
  // partition, read in a container only (none: nothing to check), and the directory of
  // their links (the image's `data/`).
  // While staging: which chunks of the copies have landed (io/landing.h), and the copies
  // being made ("PART.staging"), opened on first use.
  io::LandingMap landing;
  std::unique_ptr<std::atomic<int>[]> landing_fds;
  // The copy of partition p being made (or made by now: the same file, renamed), opened on
  // first use; a negative errno on failure.
  int LandingFd(uint32_t p);
  std::vector<BlobId> held_ids;
  std::string held_dir;
  // `fd` (partition p's blob opened through its link, or a negative errno) if it is the held
  // file, else -EIO (fd closed; said once per process).
  long CheckHeld(uint32_t p, long fd);
  std::atomic<bool> said_not_held{false};

  // Partition p's blob as a message names it: DATA's file for a blob read in place (whose
  // path here is a link to fanrun's descriptor), else the path read.
  std::string ShownPartition(uint32_t p) const;
  // The blob fd of partition p, opened on first use; a negative errno on failure. While
  // fanrun stages, the in-place blob's until the copy is there.
  int BlobFd(uint32_t p);
  // Whether partition p is read from its final blob (not in place while staging).
  bool BlobSettled(uint32_t p) const {
    return blob_fds[p].load(std::memory_order_acquire) >= 0 || staging_from.empty();
  }
  // Partition p's blob mapped read-only (shared, whole), made on first use; nullptr if it
  // cannot be mapped. Never unmapped: a process maps each local blob once. *resident: its
  // pages are always in memory (io::AlwaysResident), so no mincore is needed.
  const uint8_t* BlobMap(uint32_t p, uint64_t* size, bool* resident);
  // Lowers the recorded size of every mapped blob that is now shorter than its mapping (cut
  // while the job runs), so no copy reaches past its new end.
  void ShrinkCutBlobs();
  // True in a vfork/CLONE_VM child: it shares the parent's memory, so the hook must not
  // allocate, lock or change shared tables there.
  bool InVforkChild() const;
  bool IsReservedFd(long fd) const {
    return reserved_lo > 0 && static_cast<int>(fd) >= reserved_lo;
  }
};

// nullptr when no dataset is configured (FANSTORE_IMAGE unset): everything passes through.
State* Get();
Status Init();

}  // namespace fanstore::runtime
