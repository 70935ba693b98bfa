// Whether CMD's program can take the runtime: a program the kernel starts without a dynamic
// loader (a statically linked ELF file, or a script whose interpreter is one) never loads
// libfanstore.so, so it is not served: it sees the mount point's empty directories, or the
// files underneath. fanrun says so in one line before it starts such a CMD.
// Thread-safety: reentrant (reads files only).
#pragma once

#include <string>

namespace fanstore::fanrun {

// `program` found as execvp(3) would (along PATH unless it holds a '/'); "" when it loads
// the runtime (or is not found, or is not an ELF file or a script: exec will say), else a
// few words naming what it is ("/sbin/ldconfig is statically linked"). With `root` (a
// container image's directory), the program and its interpreter are looked for there,
// along the usual PATH.
std::string WithoutRuntime(const std::string& program, const std::string& root = "");

}  // namespace fanstore::fanrun
