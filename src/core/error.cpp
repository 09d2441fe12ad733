#include "core/error.h"

#include <sstream>

namespace dlperf {
namespace {
int g_rank = -1;  // process identity for messages only; never read for control flow
std::string g_host;
}  // namespace

void set_error_identity(int rank, std::string host) {
  g_rank = rank;
  g_host = std::move(host);
}

std::string error_identity() {
  std::string id = g_host.empty() ? std::string("localhost") : g_host;
  if (g_rank >= 0) id += ":rank " + std::to_string(g_rank);
  return id;
}

void throw_library_error(std::string_view library, std::string_view call, std::string_view detail,
                         const std::source_location& where) {
  std::ostringstream os;
  os << library << " error: " << call << " failed: " << detail << " at " << where.file_name() << ':' << where.line()
     << " (" << error_identity() << ')';
  throw Error(ErrorKind::library, os.str());
}

void throw_usage_error(const std::string& message) { throw Error(ErrorKind::usage, message); }

void throw_internal_error(std::string_view condition, const std::string& message, const std::source_location& where) {
  std::ostringstream os;
  os << "internal error: " << message << " [" << condition << "] at " << where.file_name() << ':' << where.line()
     << " (" << error_identity() << ')';
  throw Error(ErrorKind::internal, os.str());
}

}  // namespace dlperf
