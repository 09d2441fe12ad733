// A minimal JSON reader for baseline files in DLPerf's result shape (objects, arrays,
// strings, numbers, true/false/null). Not a general library: no \u escapes beyond ASCII.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dlperf::analysis {

struct JsonValue {
  enum class Kind { null, boolean, number, string, array, object } kind = Kind::null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<JsonValue> array;
  std::map<std::string, JsonValue> object;
};

// Throws Error(usage) "<what>: invalid JSON at byte N: ..." on malformed text.
JsonValue parse_json(const std::string& text, const std::string& what);

}  // namespace dlperf::analysis
