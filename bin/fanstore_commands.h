// The subcommands of the `fanstore` tool. Each returns a process exit code (cli::kExit*) and
// prints its own one-line errors as "fanstore: what: why".
// Thread-safety: the tool's main thread (pack runs its own workers inside).
#pragma once

#include <string>
#include <vector>

#include "meta/pack.h"

namespace fanstore::tool {

int Pack(const meta::PackOptions& opts, bool quiet);
int Ls(const std::string& data, const std::string& path, bool long_format, bool recursive);
int Stat(const std::string& data, const std::string& path);
int Cat(const std::string& data, const std::string& path);
int Verify(const std::string& data, bool quiet);
int Info(const std::string& data, bool json);

}  // namespace fanstore::tool
