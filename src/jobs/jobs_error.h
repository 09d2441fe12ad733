// dlperf-jobs' one error type: bad input (a profile or matrix to fix) versus an I/O failure
// while writing. The program's main maps them to exit codes 2 and 3.
#pragma once

#include <stdexcept>
#include <string>

namespace dlperf::jobs {

enum class JobsErrorKind {
  bad_input,  // profile, matrix or option to fix: exit 2, nothing written
  io,         // the output directory could not be written: exit 3
};

class JobsError : public std::runtime_error {
 public:
  JobsError(JobsErrorKind kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
  JobsErrorKind kind() const { return kind_; }

 private:
  JobsErrorKind kind_;
};

[[noreturn]] inline void throw_bad_input(const std::string& message) { throw JobsError(JobsErrorKind::bad_input, message); }

}  // namespace dlperf::jobs
