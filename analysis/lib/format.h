// Number formatting shared by the report writers, so tables, CSV and JSON agree on digits.
#pragma once

#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

namespace dlperf::analysis {

inline std::string fixed(double v, int digits) {
  if (std::fabs(v) < 0.5 * std::pow(10.0, -digits)) v = 0;  // no "-0.00"
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}
// Samples/s in tables: 2 decimals, but 3 significant digits below 1 (a Llama step of minutes on
// a CPU is 0.0025 samples/s, which 2 decimals showed as 0.00, and a 25% regression as equal).
inline std::string rate(double v) {
  if (!(v > 0 && v < 1)) return fixed(v, 2);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}
inline std::string fixed_or(const std::optional<double>& v, int digits, const std::string& empty) {
  return v ? fixed(*v, digits) : empty;
}
inline std::string percent(double fraction, int digits = 1) { return fixed(100 * fraction, digits) + "%"; }
// Text in markdown: a '<' (a --variant "ib<4") would open an HTML tag that a renderer hides, and
// an '&' an entity.
inline std::string md_text(const std::string& s) {
  std::string out;
  for (char ch : s) out += ch == '<' ? std::string("&lt;") : ch == '&' ? std::string("&amp;") : std::string(1, ch);
  return out;
}
// Text in a markdown table cell: a '|' (a --variant, a file name) would split the row.
inline std::string cell(const std::string& s) {
  std::string out;
  for (char ch : md_text(s)) out += ch == '|' ? std::string("\\|") : std::string(1, ch == '\n' || ch == '\r' ? ' ' : ch);
  return out;
}
// Full precision for machine-read files (CSV, JSON): round trips a double.
inline std::string exact(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace dlperf::analysis
