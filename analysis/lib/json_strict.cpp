// parse_json_strict (see json_strict.h). nlohmann's parser callback sees every key as it is
// read; a stack of the keys seen per open object finds duplicates at any depth. Depth is
// bounded so hostile input cannot exhaust the stack (nlohmann recurses per nesting level).
#include "json_strict.h"

#include <set>
#include <vector>

#include "core/error.h"

namespace dlperf::analysis {
namespace {

constexpr int kMaxDepth = 64;

struct Rejected {
  std::string why;
};

// nlohmann's messages start with "[json.exception.parse_error.101] ": keep what follows.
std::string plain(const char* what) {
  std::string s = what;
  if (!s.empty() && s[0] == '[') {
    const auto end = s.find("] ");
    if (end != std::string::npos) s.erase(0, end + 2);
  }
  return s;
}

}  // namespace

nlohmann::json parse_json_strict(const std::string& text, const std::string& what) {
  std::vector<std::set<std::string>> keys;  // one set per object being read
  const nlohmann::json::parser_callback_t check = [&](int depth, nlohmann::json::parse_event_t event,
                                                      nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (depth > kMaxDepth) throw Rejected{"nested deeper than " + std::to_string(kMaxDepth) + " levels"};
    if (event == E::object_start) keys.emplace_back();
    if (event == E::object_end && !keys.empty()) keys.pop_back();
    if (event == E::key && !keys.empty() && !keys.back().insert(parsed.get<std::string>()).second)
      throw Rejected{"duplicate key \"" + parsed.get<std::string>() + "\""};
    return true;
  };
  try {
    return nlohmann::json::parse(text, check, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const Rejected& r) {
    throw_usage_error(what + ": invalid JSON: " + r.why);
  } catch (const nlohmann::json::exception& e) {
    // nlohmann quotes the bytes it last read ("last read: '\xff'"): raw, they garble the line.
    throw_usage_error(what + ": invalid JSON: " + printable(plain(e.what())));
  }
}

}  // namespace dlperf::analysis
