#include "bin/cli_util.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>

#include "base/env_names.h"

namespace fanstore::cli {

void Error(std::string_view tool, std::string_view message) {
  Say("%.*s: %.*s\n", static_cast<int>(tool.size()), tool.data(), static_cast<int>(message.size()),
      message.data());
}

void Say(const char* format, ...) {
  std::va_list args;
  va_start(args, format);
  std::va_list again;
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  std::string line(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(line.data(), line.size() + 1, format, again);
  va_end(again);
  std::fflush(stderr);  // (anything written to the stream before, first)
  for (size_t done = 0; done < line.size();) {
    const ssize_t w = ::write(STDERR_FILENO, line.data() + done, line.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    done += static_cast<size_t>(w);
  }
}

Talk TalkLevel() {
  auto set = [](const char* name) {
    const char* v = std::getenv(name);
    return v && *v && std::string_view(v) != "0";
  };
  if (set(env::kQuiet)) return Talk::kQuiet;
  const char* level = std::getenv(env::kLogLevel);
  if (set(env::kVerbose) ||
      (level && (std::string_view(level) == "info" || std::string_view(level) == "debug")))
    return Talk::kVerbose;
  return Talk::kDefault;
}

std::string HumanBytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (b >= 1024 && u < 5) {
    b /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
  return buf;
}

std::string ModeString(uint32_t mode) {
  std::string s(10, '-');
  if (S_ISDIR(mode))
    s[0] = 'd';
  else if (S_ISLNK(mode))
    s[0] = 'l';
  const char* rwx = "rwxrwxrwx";
  for (int i = 0; i < 9; ++i)
    if (mode & (1u << (8 - i))) s[1 + i] = rwx[i];
  if (mode & S_ISUID) s[3] = (mode & S_IXUSR) ? 's' : 'S';
  if (mode & S_ISGID) s[6] = (mode & S_IXGRP) ? 's' : 'S';
  if (mode & S_ISVTX) s[9] = (mode & S_IXOTH) ? 't' : 'T';
  return s;
}

std::string TimeString(int64_t ns) {
  int64_t sec = ns / 1000000000;
  int64_t frac = ns % 1000000000;
  if (frac < 0) {
    frac += 1000000000;
    --sec;
  }
  const time_t t = static_cast<time_t>(sec);
  struct tm tm;
  gmtime_r(&t, &tm);
  char buf[64];
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%09lld +0000", static_cast<long long>(frac));
  return buf;
}

std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c >= 0x7f) {
          // Not valid UTF-8 in general: escape every byte outside ASCII as \u00XX so the
          // output is always valid JSON (non-ASCII names come back as Latin-1 code points).
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

ProgressBar::ProgressBar()
    : enabled_(::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

void ProgressBar::Update(uint64_t done, uint64_t total, uint64_t bytes_done, uint64_t bytes_total) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_ < std::chrono::milliseconds(100) && done != total) return;
  last_ = now;
  drawn_ = true;
  const double secs = std::chrono::duration<double>(now - start_).count();
  const double frac = bytes_total ? static_cast<double>(bytes_done) / bytes_total
                                  : (total ? static_cast<double>(done) / total : 1.0);
  const int width = 24;
  const int fill = static_cast<int>(frac * width);
  std::string bar(fill, '=');
  if (fill < width) bar += '>' + std::string(width - fill - 1, ' ');
  const double rate = secs > 0 ? bytes_done / secs : 0;
  const double eta = rate > 0 ? (bytes_total - bytes_done) / rate : 0;
  // (a total of 0 files: not known ahead, as when packing from archives)
  const std::string files =
      total ? std::to_string(done) + "/" + std::to_string(total) : std::to_string(done);
  std::fprintf(stderr, "\r[%s] %s files  %s/%s  %s/s  ETA %.0fs   ", bar.c_str(), files.c_str(),
               HumanBytes(bytes_done).c_str(), HumanBytes(bytes_total).c_str(),
               HumanBytes(rate).c_str(), eta);
  std::fflush(stderr);
}

void ProgressBar::Finish() {
  if (enabled_ && drawn_) std::fprintf(stderr, "\r\033[K");
}

std::string CheckPositive(std::string& value) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || errno != 0 || !(v > 0) || v == HUGE_VAL)
    return "must be a number greater than 0, got '" + value + "'";
  return "";
}

std::function<std::string(std::string&)> IntegerIn(uint64_t lo, uint64_t hi) {
  return [lo, hi](std::string& value) -> std::string {
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(value.c_str(), &end, 10);
    if (value.empty() || value[0] == '-' || *end != '\0' || errno != 0 || v < lo || v > hi)
      return "must be a whole number from " + std::to_string(lo) + " to " + std::to_string(hi) +
             ", got '" + value + "'";
    return "";
  };
}

std::string FindBesideExecutable(std::initializer_list<const char*> relative) {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (const char* rel : relative) {
    const std::filesystem::path p = (exe.parent_path() / rel).lexically_normal();
    if (std::filesystem::exists(p, ec)) return p.string();
  }
  return "";
}

Result<std::string> AbsolutePath(const std::string& what, const std::string& path) {
  std::error_code ec;
  const std::filesystem::path abs = std::filesystem::absolute(path, ec);
  if (ec) return Status::Error(what + ": " + ec.message());
  return abs.lexically_normal().string();
}

}  // namespace fanstore::cli
