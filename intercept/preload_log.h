// Start-up logging of the preload library: spdlog (header-only, hidden) to stderr or
// FANSTORE_LOG_FILE at FANSTORE_LOG_LEVEL (off, error, warn, info, debug; default warn).
// Used at install time only, never on a system call's path.
// Thread-safety: InitPreloadLog once from the constructor; Logger() after that.
#pragma once

#include <spdlog/logger.h>

#include <memory>

namespace fanstore::intercept {
void InitPreloadLog();
spdlog::logger& Logger();
}  // namespace fanstore::intercept
