// Strict JSON input for baseline files (--compare FILE.json), on nlohmann-json. RFC 8259 as
// nlohmann reads it (NaN, Infinity, hex and comments rejected; \u escapes, surrogate pairs
// included, decoded to UTF-8; invalid UTF-8 rejected), plus what nlohmann lets through:
// a key repeated within one object is an error, never "the last one wins".
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace dlperf::analysis {

// Throws Error(usage) "<what>: invalid JSON: <reason>" (one line) on any malformed text.
nlohmann::json parse_json_strict(const std::string& text, const std::string& what);

}  // namespace dlperf::analysis
