// Recursive-descent JSON parser (see json_lite.h); depth-limited so hostile input cannot
// exhaust the stack.
#include "json_lite.h"

#include <cstdlib>

#include "core/error.h"

namespace dlperf::analysis {
namespace {

struct Parser {
  const std::string& s;
  const std::string& what;
  size_t i = 0;

  [[noreturn]] void fail(const std::string& msg) {
    throw_usage_error(what + ": invalid JSON at byte " + std::to_string(i) + ": " + msg);
  }
  void ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')) ++i;
  }
  bool eat(char c) {
    ws();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  std::string str() {
    if (!eat('"')) fail("expected a string");
    std::string out;
    while (i < s.size() && s[i] != '"') {
      char c = s[i++];
      if (c == '\\') {
        if (i >= s.size()) fail("unterminated escape");
        char e = s[i++];
        switch (e) {
          case 'n': out += '\n'; break;
          case 't': out += '\t'; break;
          case 'r': out += '\r'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'u':
            if (i + 4 > s.size()) fail("short \\u escape");
            out += static_cast<char>(std::strtol(s.substr(i, 4).c_str(), nullptr, 16) & 0x7f);
            i += 4;
            break;
          default: out += e;
        }
      } else {
        out += c;
      }
    }
    if (i >= s.size()) fail("unterminated string");
    ++i;
    return out;
  }
  JsonValue value(int depth) {
    if (depth > 64) fail("nested too deeply");
    ws();
    if (i >= s.size()) fail("unexpected end");
    JsonValue v;
    char c = s[i];
    if (c == '{') {
      ++i;
      v.kind = JsonValue::Kind::object;
      if (eat('}')) return v;
      do {
        std::string k = str();
        if (!eat(':')) fail("expected ':'");
        v.object[k] = value(depth + 1);
      } while (eat(','));
      if (!eat('}')) fail("expected '}'");
    } else if (c == '[') {
      ++i;
      v.kind = JsonValue::Kind::array;
      if (eat(']')) return v;
      do v.array.push_back(value(depth + 1));
      while (eat(','));
      if (!eat(']')) fail("expected ']'");
    } else if (c == '"') {
      v.kind = JsonValue::Kind::string;
      v.string = str();
    } else if (s.compare(i, 4, "true") == 0 || s.compare(i, 5, "false") == 0) {
      v.kind = JsonValue::Kind::boolean;
      v.boolean = s[i] == 't';
      i += v.boolean ? 4 : 5;
    } else if (s.compare(i, 4, "null") == 0) {
      i += 4;
    } else {
      char* end = nullptr;
      v.number = std::strtod(s.c_str() + i, &end);
      if (end == s.c_str() + i) fail("unexpected character");
      v.kind = JsonValue::Kind::number;
      i = static_cast<size_t>(end - s.c_str());
    }
    return v;
  }
};

}  // namespace

JsonValue parse_json(const std::string& text, const std::string& what) {
  Parser p{text, what};
  JsonValue v = p.value(0);
  p.ws();
  if (p.i != text.size()) p.fail("trailing characters");
  return v;
}

}  // namespace dlperf::analysis
