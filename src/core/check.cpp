// The MPI part of the status checks (core/check.h), apart from error.cpp so programs without
// MPI (dlperf-jobs) can use dlperf's errors.
#include "core/check.h"

#include <cerrno>
#include <cstring>
#include <sstream>

namespace dlperf {
std::string errno_string() {
  const int e = errno;
  return std::string(std::strerror(e)) + " (errno " + std::to_string(e) + ")";
}

void throw_out_of_memory_error(std::string_view library, std::string_view call, std::string_view detail,
                               const std::source_location& where) {
  std::ostringstream os;
  os << "out of memory: " << library << " " << call << " failed: " << detail << " at " << where.file_name() << ':' << where.line()
     << " (" << error_identity() << "); use a smaller --batch-size (--find-max-batch finds the largest)";
  throw OutOfMemoryError(os.str());
}

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(len));
}
}  // namespace dlperf
