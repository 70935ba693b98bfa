// fanrun's attach mode: `fanrun serve` stages and serves a dataset until `fanrun stop`, and
// `fanrun attach` runs a program on it. A served job is found only in this user's private
// directories (bin/private_dir.h): a job planted by another user is never attached to.
// Thread-safety: fanrun's main thread only; Serve installs signal handlers.
#pragma once

#include <string>
#include <vector>

#include "bin/fanrun_node.h"

namespace fanstore::fanrun {

// Stages and serves until stopped (SIGTERM, SIGINT, SIGHUP or `fanrun stop`); the exit status.
int Serve(NodeOptions& opt);
// Execs CMD attached to served job `job` ("" = the only one on this host), on the rank of
// this host that the launcher's local rank picks; returns only when that fails.
int Attach(const std::string& job, std::vector<std::string>& cmd);
// Ends served job `job` on every node and waits (up to a minute) until it is gone here.
int Stop(const std::string& job);

}  // namespace fanstore::fanrun
