// Errors inside weft are C++ exceptions carrying a status; the C API turns them into weft_status codes
// and a thread-local message. Nothing else crosses the boundary.
#pragma once

#include <stdexcept>
#include <string>

namespace weft {

enum class Status : int {
  ok = 0,
  invalid_argument = 1,
  invalid_handle = 2,
  out_of_memory = 3,
  unsupported = 4,
  compile = 5,
  cuda = 6,
  cache = 7,
  deadlock = 8,
  io = 9,
  internal = 10,
};

class Error : public std::runtime_error {
 public:
  Error(Status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  Status status() const noexcept { return status_; }

 private:
  Status status_;
};

[[noreturn]] inline void fail(Status status, const std::string& message) { throw Error(status, message); }
[[noreturn]] inline void invalid(const std::string& message) { fail(Status::invalid_argument, message); }

}  // namespace weft
