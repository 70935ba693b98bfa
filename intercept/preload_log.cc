#include "intercept/preload_log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>

namespace fanstore::intercept {
namespace {
std::shared_ptr<spdlog::logger> g_log;
}

void InitPreloadLog() {
  const char* file = std::getenv("FANSTORE_LOG_FILE");
  const char* level = std::getenv("FANSTORE_LOG_LEVEL");
  spdlog::sink_ptr sink;
  if (file && *file) {
    sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(file);
  }
  if (!sink) sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  g_log = std::make_shared<spdlog::logger>("fanstore", sink);
  g_log->set_pattern("fanstore[%P] %l: %v");
  g_log->set_level(level ? spdlog::level::from_str(level) : spdlog::level::warn);
  g_log->flush_on(spdlog::level::trace);
}

spdlog::logger& Logger() {
  if (!g_log) InitPreloadLog();
  return *g_log;
}

}  // namespace fanstore::intercept
