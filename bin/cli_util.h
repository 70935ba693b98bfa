// Helpers shared by the command-line tools: exit codes, one-line errors, human-readable
// sizes, absolute paths, a throttled progress bar for terminals, and JSON string escaping.
// Thread-safety: ProgressBar is used by one thread; the rest are pure functions.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>

#include "base/status.h"

namespace fanstore::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// Prints "tool: message" on stderr.
void Error(std::string_view tool, std::string_view message);
// Prints a formatted line on stderr with one write(2): the ranks of a job share the
// launcher's stderr, and glibc writes an unbuffered stream's printf in 128-byte pieces,
// which other ranks' lines could fall between.
void Say(const char* format, ...) __attribute__((format(printf, 1, 2)));
// How much fanrun says on stderr, which is CMD's stderr too, so that a wrapped program's
// output is its own: warnings and errors always, one line each; kDefault adds one line
// from rank 0 of a job of several nodes (how fast it was ready); kVerbose (FANSTORE_VERBOSE,
// set by --verbose, or FANSTORE_LOG_LEVEL info or debug) what each node does with DATA and
// why; kQuiet (FANSTORE_QUIET, for scripts and tests) nothing but warnings and errors,
// whatever else is set. Read from the environment.
enum class Talk { kQuiet, kDefault, kVerbose };
Talk TalkLevel();
std::string HumanBytes(double bytes);        // "1.5 GiB"
std::string ModeString(uint32_t mode);       // "drwxr-xr-x"
std::string TimeString(int64_t mtime_ns);    // "2024-05-01 12:00:00.123456789 +0000"
std::string JsonString(std::string_view s);  // quoted and escaped
// An option check (CLI::Validator's function): "" when `value` is a number > 0, else the
// reason ("must be a number greater than 0, got '-1'"). CLI11's own PositiveNumber prints
// its range up to DBL_MAX.
std::string CheckPositive(std::string& value);
// The same for a whole number in [lo, hi]: CLI11's own Range words its message differently
// from one version to the next.
std::function<std::string(std::string&)> IntegerIn(uint64_t lo, uint64_t hi);
// `path` made absolute against the working directory and normalized; an error naming
// `what` ("--stats x: No such file or directory") when that cannot be done, as when the
// working directory has been removed (std::filesystem::absolute would throw).
Result<std::string> AbsolutePath(const std::string& what, const std::string& path);
// The first of `relative` (paths from this executable's directory, as /proc/self/exe
// names it) that exists, normalized; "" if none. For the files installed or built beside a
// tool: ../lib/libfanstore.so, the plugin next to fsbench.
std::string FindBesideExecutable(std::initializer_list<const char*> relative);

// A one-line progress display on stderr, only when stderr is a terminal; redraws at most
// ten times a second. Finish() clears the line.
class ProgressBar {
 public:
  ProgressBar();
  void Update(uint64_t done, uint64_t total, uint64_t bytes_done, uint64_t bytes_total);
  void Finish();
  bool enabled() const { return enabled_; }

 private:
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace fanstore::cli
