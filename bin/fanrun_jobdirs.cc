// The job's and this rank's directories under /dev/shm, stale jobs left by dead ones, and
// the node-local directory (--local-dir).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>

#include "bin/cli_util.h"
#include "bin/fanrun_node_parts.h"
#include "bin/private_dir.h"
#include "io/mpi.h"

namespace fanstore::fanrun {

namespace fs = std::filesystem;

std::string HostName() {
  char h[256] = {};
  ::gethostname(h, sizeof h - 1);
  return h;
}

Status WriteFile(const std::string& path, std::string_view bytes) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) return Status::Error(path + ": cannot write (is the file system full?)");
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) return Status::FromErrno(path, errno);
  return Status::Ok();
}

// True while `pid` runs: a zombie (exited, not yet reaped: its parent, a launcher's
// daemon, may never reap it in a container without an init) is not running.
bool ProcessRuns(int pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(stat, text);
  const size_t paren = text.rfind(')');  // "pid (comm) S ...": comm may hold anything
  if (paren == std::string::npos || paren + 2 >= text.size()) return true;  // (hidden: keep it)
  const char state = text[paren + 2];
  return state != 'Z' && state != 'X';
}

// Removes what fanrun ranks that died without cleaning up (killed, or crashed) left under
// `base` (a private directory: everything in it was written by this user's fanruns): a
// rank directory whose recorded pid is gone, its local directory if it is still the one
// that rank made (its recorded device and inode), and job directories left empty.
void RemoveStale(const std::string& base) {
  std::error_code ec;
  for (const auto& job : fs::directory_iterator(base, ec)) {
    if (job.path().filename().string().rfind("job-", 0) != 0 || job.is_symlink(ec)) continue;
    for (const auto& rank : fs::directory_iterator(job.path(), ec)) {
      int pid = 0;
      std::ifstream(rank.path() / "pid") >> pid;
      if (pid <= 0 || ProcessRuns(pid)) continue;
      std::string local, id_text;
      {
        std::ifstream in(rank.path() / "local");
        std::getline(in, local);
        std::getline(in, id_text);
      }
      DirId id;
      if (!local.empty() && ParseDirId(id_text, &id)) RemoveIfSame(local, id);
      fs::remove_all(rank.path(), ec);
    }
    bool ranks_left = false;
    for (const auto& rank : fs::directory_iterator(job.path(), ec))
      ranks_left |= rank.path().filename().string().rfind("rank-", 0) == 0;
    if (!ranks_left) {
      ::unlink((job.path() / "serve").c_str());
      ::rmdir(job.path().c_str());
    }
  }
}

// The parent given as --local-dir, made (like mkdir -p, new directories 0700) if missing.
// Another user must not be able to rename fanrun's directory inside it and put their own
// in its place: a directory others can write to must be sticky, as /tmp is.
Status MakeLocalParent(const std::string& dir) {
  std::error_code ec;
  const mode_t old = ::umask(077);
  fs::create_directories(dir, ec);
  ::umask(old);
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return Status::FromErrno("--local-dir " + dir, errno);
  if (!S_ISDIR(st.st_mode)) return Status::Error("--local-dir " + dir + ": not a directory");
  if ((st.st_mode & 022) && !(st.st_mode & S_ISVTX))
    return Status::Error("--local-dir " + dir +
                         ": others can write to it and it is not sticky (chmod +t), so another "
                         "user could swap fanrun's files there; use a directory of your own");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return Status::FromErrno("--local-dir " + dir, errno);
  return Status::Ok();
}

// The manifest (every rank reads the small file itself from the shared file system), and
// this rank's directories: the job's and its own under /dev/shm, and its local directory.
void Node::MakeJobDirectories(const NodeOptions& opt, StartUp* s) {
  Status& st = s->st;
  struct stat data_st;
  // Every error about DATA names the option, as the user wrote it.
  const std::string data = "--data " + opt.data;
  if (::stat(opt.data.c_str(), &data_st) != 0)
    st = errno == ENOENT ? Status::Error(data + ": no such directory")
                         : Status::FromErrno(data, errno);
  else if (!S_ISDIR(data_st.st_mode))
    st = Status::Error(data + ": not a directory (expected a packed dataset)");
  if (st.ok()) {
    auto manifest = meta::Manifest::Load(opt.data);
    if (manifest.ok())
      s->manifest = std::move(manifest).value();
    else
      st = Status::Error("--data " + manifest.status().message());
  }
  if (auto abs = cli::AbsolutePath(data, opt.data); abs.ok())
    s->abs_data = *abs;
  else if (st.ok())
    st = abs.status();
  std::error_code ec;
  // Every rank needs its own base (ranks on other hosts have their own /dev/shm).
  auto base = JobsBaseForNewJob();
  if (!base.ok()) {
    if (st.ok()) st = base.status();
    if (mpi_) mpi::World().Barrier();
    return;
  }
  if (*base != JobsBaseName()) fresh_base_ = *base;  // (removed at the end, when empty)
  if (rank_ == 0) RemoveStale(*base);
  if (mpi_) mpi::World().Barrier();  // before any rank of this job creates its directory
  job_dir_ = *base + "/job-" + job_;
  rank_dir_ = job_dir_ + "/rank-" + std::to_string(rank_);
  if (st.ok()) {
    if (::mkdir(job_dir_.c_str(), 0700) != 0 && errno != EEXIST)
      st = Status::FromErrno(job_dir_, errno);
  }
  if (st.ok()) st = CheckPrivateDir(job_dir_).status();
  if (st.ok()) {
    fs::remove_all(rank_dir_, ec);
    if (::mkdir(rank_dir_.c_str(), 0700) != 0) st = Status::FromErrno(rank_dir_, errno);
  }
  if (st.ok()) st = WriteFile(rank_dir_ + "/pid", std::to_string(::getpid()) + "\n");
  if (st.ok() && opt.serve) WriteFile(job_dir_ + "/serve", "serve\n");
  if (opt.local_dir.empty()) {
    local_dir_ = rank_dir_;
  } else if (st.ok()) {
    auto abs_local = cli::AbsolutePath("--local-dir " + opt.local_dir, opt.local_dir);
    st = abs_local.ok() ? UseLocalDir("--local-dir " + opt.local_dir, *abs_local)
                        : abs_local.status();
  }
}

// This rank's local directory: a fresh private one in `abs_dir` (named `what` in errors),
// removed at the end (its name and identity in the rank's `local` file, for the clean-up).
Status Node::UseLocalDir(const std::string& what, const std::string& abs_dir) {
  FANSTORE_RETURN_IF_ERROR(MakeLocalParent(abs_dir));
  // A fresh name (mkdtemp): a name known in advance could be made first by another user.
  auto made = MakeFreshPrivateDir(abs_dir + "/fanstore-" + std::to_string(::getuid()) + "-" + job_ +
                                  "-rank" + std::to_string(rank_) + "-");
  if (!made.ok()) return Status::Error(what + ": " + made.status().message());
  local_dir_ = *made;
  auto id = CheckPrivateDir(local_dir_);
  if (!id.ok()) return id.status();
  local_id_ = *id;
  own_local_dir_ = true;
  return WriteFile(rank_dir_ + "/local", local_dir_ + "\n" + FormatDirId(local_id_) + "\n");
}

}  // namespace fanstore::fanrun
