// A container runtime as CMD: `fanrun ... -- apptainer exec IMG python3 train.py`, and the
// same with singularity, ch-run, podman run and enroot start. fanrun stays outside the
// container; the processes inside load the runtime only if the container is handed what it
// needs, each runtime in its own way (docs/containers.md):
//  - the runtime library: the host's `lib/` directory (the bundle's, whose library needs
//    nothing of the image but glibc 2.28) bound at RANK_DIR/lib, and LD_PRELOAD naming it
//    there; the container runtime itself runs without it;
//  - the job's directory under /dev/shm (the namespace image, the marks, the agent's
//    socket) and the local directory with the staged copies, at their own paths;
//  - DATA bound at RANK_DIR/data, in place of the links to fanrun's descriptors, which a
//    process in another user namespace may not follow (runtime/process/held_blobs.h
//    refuses a DATA repacked since);
//  - every FANSTORE_* variable, in the runtime's own way of setting the environment inside
//    (which also survives apptainer's --cleanenv), and a mark the runtime leaves once it
//    serves a process, so that fanrun can say when none did.
// Thread-safety: fanrun's main thread (changes the environment).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace fanstore::fanrun {

enum class ContainerRuntime { kNone, kApptainer, kSingularity, kCharliecloud, kPodman, kEnroot };

// Which container runtime CMD starts (by its program's name), kNone for any other command.
ContainerRuntime RecognizeContainer(const std::vector<std::string>& cmd);
const char* ContainerRuntimeName(ContainerRuntime rt);

struct ContainerJob {
  std::string job_dir;    // this job's directory (holds rank_dir)
  std::string rank_dir;   // this rank's directory
  std::string local_dir;  // the staged copies (may be rank_dir)
  std::string data;       // DATA, absolute; "" when no blob is read in place
  std::string preload;    // the runtime library on the host
};

// Hands `job` to the container runtime in *cmd: edits *cmd (binds and variables, for the
// runtimes that take them as options) and this process's environment (for the others, and
// LD_PRELOAD back to what the user had). Returns the mark's path, or an error naming what
// cannot be handed in and why (a directory ch-run cannot bind, a static program in the
// image).
Result<std::string> HandToContainer(ContainerRuntime rt, const ContainerJob& job,
                                    std::vector<std::string>* cmd);

// After CMD: one line when no process inside the container loaded the runtime (`mark` was
// never made), naming the library and the likely reasons.
void SayIfUnserved(ContainerRuntime rt, const std::string& mark, const std::string& preload,
                   const std::string& mount);

}  // namespace fanstore::fanrun
