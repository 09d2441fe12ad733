// Strict number parsing for every program's options and input files (issue 27 item 11): the
// whole text is the number, or it is not one. std::stoi and friends accept "12x" as 12,
// " 12" as 12 and throw a bare "stoi" on overflow; boost's lexical_cast turns "-1" into
// 2^64-1 for an unsigned. These return nothing instead, and the caller says which option
// or file:line was wrong, in one line.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace dlperf {

// The most threads a thread-count option takes in one process (--threads, --loader-threads,
// dlperf-make-dataset --threads): above the largest nodes' hardware threads (2 x 192 cores x 2),
// below where oneDNN's and the loader's start-up runs out of memory or crashes (30,000 and 100,000
// threads did, and a job made of them never stepped).
inline constexpr int kMaxThreads = 1024;

// A base-10 integer, optional leading '-', nothing else (no blanks, no '+', no trailing text);
// empty when the text is not one or does not fit int64_t.
inline std::optional<int64_t> parse_int64(std::string_view s) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// A non-negative base-10 integer that fits uint64_t ("-1" is refused, not wrapped).
inline std::optional<uint64_t> parse_uint64(std::string_view s) {
  uint64_t v = 0;
  if (s.empty() || s.front() == '-') return std::nullopt;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// A finite decimal or scientific number ("0.5", "1e-3"); no inf/nan, no trailing text.
inline std::optional<double> parse_double(std::string_view s) {
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

// Whether `s` is a decimal number whose digits before any exponent are not all zero ("1e-400",
// "0.001", "-2"): text that names a non-zero value. A parser that read such text as 0 (an
// underflow: 1e-400 as a double, 1e-50 as a float) would turn "tiny" into "off".
inline bool names_a_nonzero_number(std::string_view s) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  bool digits = false, nonzero = false, dot = false;
  for (; i < s.size() && ((s[i] >= '0' && s[i] <= '9') || (s[i] == '.' && !dot)); ++i) {
    if (s[i] == '.') dot = true;
    else digits = true, nonzero = nonzero || s[i] != '0';
  }
  if (!digits) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    const size_t first = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    if (i == first) return false;
  }
  return i == s.size() && nonzero;
}

// "3,4,6,3": comma-separated integers, each strict; empty when any part is not one (an empty
// part, "1,,2", or a trailing comma included).
inline std::optional<std::vector<int64_t>> parse_int_list(std::string_view s) {
  std::vector<int64_t> out;
  size_t at = 0;
  while (true) {
    const size_t comma = s.find(',', at);
    const auto v = parse_int64(s.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at));
    if (!v) return std::nullopt;
    out.push_back(*v);
    if (comma == std::string_view::npos) return out;
    at = comma + 1;
  }
}

}  // namespace dlperf
