// Private directories: where fanrun keeps a job's shared objects (namespace image, agent
// socket, staged blobs) in places other users can write to (/dev/shm, a shared scratch
// directory). A directory is trusted only when, opened without following a link, it is a
// directory this user owns that no group or other can write. Below such a directory no
// other user can create, rename or replace anything; and since its parent is sticky
// (/dev/shm, /tmp) or the user's own, nobody else can rename the directory itself away
// and put another in its place. So once checked, paths below it may be used by name.
// Thread-safety: pure functions over the file system; no shared state.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "base/status.h"

namespace fanstore::fanrun {

// A directory's identity, to prove later that a path still names the directory fanrun made.
struct DirId {
  dev_t dev = 0;
  ino_t ino = 0;
  bool operator==(const DirId&) const = default;
};

// Checks that `path` is a private directory of the effective user (see above); the error
// names the path and what is wrong ("owned by uid 1001", "mode 0777: others can write to
// it", "a symbolic link", "not a directory").
Result<DirId> CheckPrivateDir(const std::string& path);
// Makes `path` with mode 0700 if it does not exist, then checks it as above.
Result<DirId> MakePrivateDir(const std::string& path);
// Makes a new private directory named `prefix` + six random characters (mkdtemp): nobody
// can have made it first. Returns its path.
Result<std::string> MakeFreshPrivateDir(const std::string& prefix);
// Removes the tree at `path` only if `path` is still the directory `id` (not a link, not
// another directory put in its place). True if removed.
bool RemoveIfSame(const std::string& path, DirId id);
// "dev:ino", and back (false when `s` is not one).
std::string FormatDirId(DirId id);
bool ParseDirId(const std::string& s, DirId* id);

// The base of this user's job directories on this host: /dev/shm/fanstore-<uid> when it is
// private (made if missing). If another user made that name first (or it is a file, or
// open to others), it is not touched: one warning line names it, and a fresh private
// directory /dev/shm/fanstore-<uid>-XXXXXX is used instead.
Result<std::string> JobsBaseForNewJob();
// The usual base's name, /dev/shm/fanstore-<uid>.
std::string JobsBaseName();
// Every private base of this user on this host (the usual one and fresh ones), where
// `fanrun attach` and `stop` look for served jobs. Foreign objects are skipped.
std::vector<std::string> TrustedJobsBases();

}  // namespace fanstore::fanrun
