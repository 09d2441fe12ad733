// One checking mechanism for every library's status code (CUDA, cuDNN, cuBLAS, NCCL, MPI,
// oneDNN, HDF5) and for dlperf's own invariants. A failed check throws dlperf::Error with
// the call, file:line, host and rank; only a program's top level decides to MPI_Abort.
#pragma once

#include <source_location>
#include <stdexcept>
#include <string>
#include <string_view>

namespace dlperf {

// What kind of failure: the top level maps it to an exit code.
enum class ErrorKind {
  usage,    // bad arguments or input: exit 2, nothing written
  library,  // a library call failed
  fault,    // another rank died, a timeout, a signal
  internal, // a broken invariant of dlperf itself
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// An allocation failed for lack of memory (device memory, or the CPU backend's address space
// under --memory-limit-mb). A library error like any other to the top level; --find-max-batch
// catches it to try a smaller batch, after the failed attempt's objects have freed everything.
class OutOfMemoryError : public Error {
 public:
  explicit OutOfMemoryError(const std::string& what) : Error(ErrorKind::library, what) {}
};

// Identity used in error messages: set once after MPI is up (rank -1 before).
void set_error_identity(int rank, std::string host);
std::string error_identity();  // "host:rank N" or "host"

// `s` for a one-line message: control bytes (a newline included) and bytes that are not part of
// valid UTF-8 become \xNN, so a damaged name read from a file cannot split or garble the line.
std::string printable(std::string_view s);

[[noreturn]] void throw_library_error(std::string_view library, std::string_view call, std::string_view detail,
                                      const std::source_location& where);
[[noreturn]] void throw_usage_error(const std::string& message);
[[noreturn]] void throw_internal_error(std::string_view condition, const std::string& message,
                                       const std::source_location& where);

}  // namespace dlperf

// Invariant of dlperf itself (not a user error): throws ErrorKind::internal.
#define DLPERF_ASSERT(cond, msg)                                                                 \
  do {                                                                                           \
    if (!(cond)) ::dlperf::throw_internal_error(#cond, (msg), std::source_location::current()); \
  } while (0)
