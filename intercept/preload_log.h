// Start-up logging of the preload library: spdlog (header-only, hidden) to stderr or
// FANSTORE_LOG_FILE at FANSTORE_LOG_LEVEL (off, error, warn, info, debug; default warn).
// Used at install time only, never on a system call's path.
// Thread-safety: InitPreloadLog once from the constructor; Logger() after that.
#pragma once

#include <spdlog/logger.h>

#include <memory>

namespace fanstore::intercept {
// Reads the level; the logger and its sink are created on first use.
void InitPreloadLog();
bool LogEnabled(spdlog::level::level_enum level);
spdlog::logger& Logger();
}  // namespace fanstore::intercept
