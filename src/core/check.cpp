// The MPI part of the status checks (core/check.h), apart from error.cpp so programs without
// MPI (dlperf-jobs) can use dlperf's errors.
#include "core/check.h"

#include <cerrno>
#include <cstring>

namespace dlperf {
std::string errno_string() {
  const int e = errno;
  return std::string(std::strerror(e)) + " (errno " + std::to_string(e) + ")";
}

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(len));
}
}  // namespace dlperf
