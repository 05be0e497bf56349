// Status and Result<T>: expected failures as values that carry a message.
#pragma once

#include <fmt/format.h>

#include <string>
#include <utility>
#include <variant>

namespace shoal {

// An ok/error outcome. Errors carry a human-readable message saying what and where.
class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(std::string message) { return Status(std::move(message)); }

  bool ok() const { return !error_; }
  const std::string& message() const { return message_; }
  // Prefixes context ("while loading X: ") to an error; ok stays ok.
  Status Annotate(const std::string& context) const {
    return ok() ? *this : Status(context + ": " + message_);
  }

 private:
  explicit Status(std::string message) : error_(true), message_(std::move(message)) {}
  bool error_ = false;
  std::string message_;
};

template <typename... Args>
Status Errorf(fmt::format_string<Args...> f, Args&&... args) {
  return Status::Error(fmt::format(f, std::forward<Args>(args)...));
}

// A value or an error Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT: implicit by design

  bool ok() const { return v_.index() == 0; }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<1>(v_);
  }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace shoal

#define SHOAL_CONCAT_INNER(a, b) a##b
#define SHOAL_CONCAT(a, b) SHOAL_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function if `expr` is an error.
#define SHOAL_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::shoal::Status shoal_status_ = (expr);        \
    if (!shoal_status_.ok()) return shoal_status_; \
  } while (0)

// `SHOAL_ASSIGN_OR_RETURN(auto x, MakeX());` unwraps a Result or returns its error.
#define SHOAL_ASSIGN_OR_RETURN(lhs, expr) \
  SHOAL_ASSIGN_OR_RETURN_IMPL(SHOAL_CONCAT(shoal_result_, __LINE__), lhs, expr)
#define SHOAL_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()
