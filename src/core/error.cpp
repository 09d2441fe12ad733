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

namespace {
// The length of the valid UTF-8 sequence of 2 to 4 bytes at s[i], or 0 (RFC 3629: no overlong
// forms, no surrogates, nothing above U+10FFFF).
size_t utf8_sequence(std::string_view s, size_t i) {
  const auto at = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b = at(i);
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
  if (b >= 0xC2 && b <= 0xDF) n = 2;
  else if (b >= 0xE0 && b <= 0xEF) n = 3, lo = b == 0xE0 ? 0xA0 : 0x80, hi = b == 0xED ? 0x9F : 0xBF;
  else if (b >= 0xF0 && b <= 0xF4) n = 4, lo = b == 0xF0 ? 0x90 : 0x80, hi = b == 0xF4 ? 0x8F : 0xBF;
  if (n == 0 || i + n > s.size() || at(i + 1) < lo || at(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if ((at(i + k) & 0xC0) != 0x80) return 0;
  return n;
}
}  // namespace

std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b >= 0x20 && b < 0x7f) {
      out += s[i++];
    } else if (const size_t n = b >= 0x80 ? utf8_sequence(s, i) : 0; n > 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[b >> 4];
      out += kHex[b & 15];
      ++i;
    }
  }
  return out;
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
