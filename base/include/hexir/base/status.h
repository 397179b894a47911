// Status and Result<T>: the one error type of Hexir, from parser to VM.
// No exceptions cross a public API; success is a cheap empty status.
#pragma once

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace hexir {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument,   // caller passed something wrong (shape, dtype, name)
  kDataLoss,          // a file is corrupt, truncated or hostile
  kNotFound,          // a named thing does not exist
  kUnavailable,       // a device or driver is not present
  kUnimplemented,     // a feature this build or backend does not have
  kResourceExhausted, // out of memory
  kFailedPrecondition,
  kInternal,
  // Appended (the C API's codes share these values): an invoke stopped by
  // Context::cancel, or past its Context::set_deadline.
  kCancelled,
  kDeadlineExceeded,
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: input 'x' expects f32[1,4], got f32[2,4]"
  std::string to_string() const;

  // Prefixes context ("loading model.hxe: ...") without losing the code.
  Status annotate(std::string_view context) const {
    if (ok()) return *this;
    return Status(code_, std::string(context) + ": " + message_);
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status ok_status() { return Status(); }
inline Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status data_loss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status resource_exhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status failed_precondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
inline Status internal_error(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
inline Status deadline_exceeded(std::string m) { return {StatusCode::kDeadlineExceeded, std::move(m)}; }

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}
  Result(Status status) : state_(std::move(status)) { assert(!std::get<Status>(state_).ok()); }

  bool ok() const { return std::holds_alternative<T>(state_); }
  Status status() const { return ok() ? Status() : std::get<Status>(state_); }
  T& value() & { return std::get<T>(state_); }
  const T& value() const& { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> state_;
};

}  // namespace hexir

#define HEXIR_CONCAT_INNER(a, b) a##b
#define HEXIR_CONCAT(a, b) HEXIR_CONCAT_INNER(a, b)

#define HEXIR_RETURN_IF_ERROR(expr)          \
  do {                                       \
    ::hexir::Status hexir_status_ = (expr);  \
    if (!hexir_status_.ok()) return hexir_status_; \
  } while (0)

// HEXIR_ASSIGN_OR_RETURN(auto x, make_x());
#define HEXIR_ASSIGN_OR_RETURN(lhs, expr) \
  HEXIR_ASSIGN_OR_RETURN_IMPL(HEXIR_CONCAT(hexir_result_, __LINE__), lhs, expr)
#define HEXIR_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()
