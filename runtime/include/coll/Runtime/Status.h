//===- Status.h - Errors of the runtime -------------------------*- C++ -*-===//
/// \file
/// The runtime's error types: no LLVM, no exceptions across the API. A Status
/// is success or an error message; a Result<T> is a value or an error.
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_STATUS_H
#define COLL_RUNTIME_STATUS_H

#include <cassert>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace coll {

/// The kind of an API error (the C API's collResult_t maps onto it).
enum class ErrorKind : uint8_t {
  None,            ///< Success.
  InvalidArgument, ///< A bad argument: a null buffer, a bad rank, type, operator...
  InvalidPlan,     ///< The plan fails validation or does not fit the world.
  SystemError,     ///< The system refused: a thread could not start, a file could not be read.
  Timeout,         ///< Ranks did not arrive in time, or the run made no progress.
  Mismatch,        ///< The ranks called with different plans, counts, types or operators.
  Internal,        ///< Anything else: a bug.
  Remote,          ///< Another rank's process failed or died (ProcessGroup).
};

/// "invalid argument", "mismatch", ...
const char *errorKindName(ErrorKind kind);

/// Success, or an error with a message that says what and where.
class [[nodiscard]] Status {
public:
  static Status success() { return Status(); }
  static Status error(std::string message) { return Status(std::move(message)); }
  bool ok() const { return !msg.has_value(); }
  explicit operator bool() const { return ok(); }
  /// The error message; empty on success.
  const std::string &message() const {
    static const std::string empty;
    return msg ? *msg : empty;
  }

private:
  Status() = default;
  explicit Status(std::string m) : msg(std::move(m)) {}
  std::optional<std::string> msg;
};

/// A value of type T, or an error.
template <typename T> class [[nodiscard]] Result {
public:
  Result(T value) : val(std::move(value)), status(Status::success()) {}
  Result(Status err) : status(std::move(err)) { assert(!status.ok() && "Result from success"); }
  bool ok() const { return status.ok(); }
  explicit operator bool() const { return ok(); }
  const Status &getStatus() const { return status; }
  const std::string &message() const { return status.message(); }
  T &value() {
    assert(ok());
    return *val;
  }
  const T &value() const {
    assert(ok());
    return *val;
  }
  T &operator*() { return value(); }
  T *operator->() { return &value(); }

private:
  std::optional<T> val;
  Status status;
};

} // namespace coll

#endif // COLL_RUNTIME_STATUS_H
