#include "intercept/preload_log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>

#include "base/env_names.h"

namespace fanstore::intercept {
namespace {
std::shared_ptr<spdlog::logger> g_log;
spdlog::level::level_enum g_level = spdlog::level::warn;
}  // namespace

void InitPreloadLog() {
  const char* level = std::getenv(env::kLogLevel);
  if (level) g_level = spdlog::level::from_str(level);
}

bool LogEnabled(spdlog::level::level_enum level) {
  return level >= g_level;
}

namespace {
void CreateLogger() {
  const char* file = std::getenv(env::kLogFile);
  spdlog::sink_ptr sink;
  if (file && *file) {
    sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(file);
  }
  if (!sink) sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  g_log = std::make_shared<spdlog::logger>("fanstore", sink);
  g_log->set_pattern("fanstore[%P] %l: %v");
  g_log->set_level(g_level);
  g_log->flush_on(spdlog::level::trace);
}
}  // namespace

spdlog::logger& Logger() {
  if (!g_log) CreateLogger();
  return *g_log;
}

}  // namespace fanstore::intercept
