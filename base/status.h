// Status and Result<T>: the error type of cold paths (packer, tools, stage-in).
// A failed Status carries one line, "what: why", ready to print after "tool: ".
// Thread-safety: values; no shared state.
#pragma once

#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace fanstore {

class Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(std::string message) { return Status(std::move(message)); }
  // "what: strerror(err)" for a positive errno value.
  static Status FromErrno(const std::string& what, int err) {
    return Status(what + ": " + std::strerror(err));
  }

  bool ok() const { return !message_.has_value(); }
  // Whether this is FromErrno's failure for `err` (its line ends in ": strerror(err)").
  bool IsErrno(int err) const {
    if (ok()) return false;
    const std::string tail = std::string(": ") + std::strerror(err);
    return message_->size() >= tail.size() &&
           message_->compare(message_->size() - tail.size(), tail.size(), tail) == 0;
  }
  explicit operator bool() const { return ok(); }
  const std::string& message() const {
    static const std::string kOk = "ok";
    return message_ ? *message_ : kOk;
  }

 private:
  explicit Status(std::string m) : message_(std::move(m)) {}
  std::optional<std::string> message_;
};

template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}       // NOLINT: implicit by design
  Result(Status error) : v_(std::move(error)) {}  // NOLINT: must be a failed Status

  bool ok() const { return v_.index() == 0; }
  T& value() & { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const T& value() const& { return std::get<0>(v_); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  T& operator*() { return std::get<0>(v_); }
  Status status() const { return ok() ? Status::Ok() : std::get<1>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace fanstore

// Returns early from a function returning Status (or Result) if `expr` failed.
#define FANSTORE_RETURN_IF_ERROR(expr) \
  do {                                 \
    ::fanstore::Status _st = (expr);   \
    if (!_st.ok()) return _st;         \
  } while (0)
