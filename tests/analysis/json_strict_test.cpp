// Baseline JSON is read strictly (issue 15 item 6): nlohmann-json's RFC 8259 parser plus a
// duplicate-key check. What json_lite got wrong: \u escapes cut to 7 bits, NaN/inf/hex
// accepted, the last of two equal keys silently kept.
#include <gtest/gtest.h>

#include "core/error.h"
#include "json_strict.h"

namespace dlperf::analysis {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_json_strict(text, "base.json");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::usage);
    const std::string w = e.what();
    EXPECT_EQ(w.rfind("base.json: invalid JSON: ", 0), 0u) << w;
    EXPECT_EQ(w.find('\n'), std::string::npos) << w;
    EXPECT_EQ(w, printable(w)) << "raw bytes in the message: " << printable(w);
    return w;
  }
  ADD_FAILURE() << "accepted: " << text;
  return "";
}

TEST(JsonStrict, RejectsWhatRfc8259Rejects) {
  for (const char* bad : {R"({"a": NaN})", R"({"a": nan})", R"({"a": Infinity})", R"({"a": -Infinity})", R"({"a": 0x10})",
                          R"({"a": 1e400})", R"({"a": 01})", R"({"a": 1,})", R"({'a': 1})", R"({"a": 1} // c)",
                          R"({"a": "\ud800"})", "{\"a\": \"\xff\"}", R"({"a": [1, 2)", ""})
    error_of(bad);
}

// nlohmann quotes what it last read; a binary file's bytes are shown escaped, not raw.
TEST(JsonStrict, TheBytesQuotedInAnErrorArePrintable) {
  EXPECT_NE(error_of("\xff\xfe{").find("\\xff"), std::string::npos) << error_of("\xff\xfe{");
  error_of("{\"a\": \"\x01\"}");
}

TEST(JsonStrict, DuplicateKeysAreAnErrorAtAnyDepth) {
  EXPECT_NE(error_of(R"({"rn50": {"1n1g": {"median_speed": 1}}, "rn50": {}})").find("duplicate key \"rn50\""), std::string::npos);
  EXPECT_NE(error_of(R"({"rn50": {"1n1g": {"median_speed": 1, "median_speed": 2}}})").find("duplicate key \"median_speed\""),
            std::string::npos);
  // The same key in sibling objects is fine.
  EXPECT_NO_THROW(parse_json_strict(R"({"a": {"x": 1}, "b": {"x": 2}, "c": [{"x": 1}, {"x": 2}]})", "ok"));
}

TEST(JsonStrict, UnicodeEscapesDecodeToUtf8) {
  const auto j = parse_json_strict(R"({"k": "caf\u00e9 \u4e2d \ud83d\ude00 \u0041"})", "u");
  EXPECT_EQ(j.at("k").get<std::string>(), "caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80 A");
}

TEST(JsonStrict, DeepNestingIsRefusedNotACrash) {
  std::string deep(10000, '[');
  deep += std::string(10000, ']');
  error_of(deep);
}

}  // namespace
}  // namespace dlperf::analysis
