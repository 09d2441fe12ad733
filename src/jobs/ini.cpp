#include "jobs/ini.h"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/file_io.h"

namespace dlperf::jobs {
namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

bool valid_name(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
  return true;
}

}  // namespace

const IniEntry* IniSection::find(const std::string& key) const {
  for (const auto& e : entries)
    if (e.key == key) return &e;
  return nullptr;
}

const IniSection* IniFile::find(const std::string& name) const {
  for (const auto& s : sections)
    if (s.name == name) return &s;
  return nullptr;
}

std::string IniFile::where(int line) const { return line > 0 ? path + ":" + std::to_string(line) : path; }

IniFile parse_ini(const std::string& text, const std::string& path) {
  IniFile f;
  f.path = path;
  std::istringstream in(text);
  std::string raw;
  int line = 0;
  while (std::getline(in, raw)) {
    ++line;
    if (line == 1 && raw.rfind("\xEF\xBB\xBF", 0) == 0) raw.erase(0, 3);  // a UTF-8 byte-order mark (some editors write one)
    if (!raw.empty() && raw.back() == '\r') raw.pop_back();             // CRLF line ends
    // Values are written into scripts verbatim: a NUL or another control byte would be too.
    for (const char c : raw)
      if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f)
        throw_bad_input(f.where(line) + ": holds a control byte (" + printable(std::string(1, c)) + "): '" + printable(raw) + "'");
    const std::string s = trim(raw);
    if (s.empty() || s[0] == '#' || s[0] == ';') continue;
    if (s[0] == '[') {
      if (s.back() != ']') throw_bad_input(f.where(line) + ": a section header reads [name] (got '" + s + "')");
      const std::string name = trim(s.substr(1, s.size() - 2));
      if (!valid_name(name)) throw_bad_input(f.where(line) + ": section name '" + name + "' may use letters, digits, _ - . only");
      if (f.find(name)) throw_bad_input(f.where(line) + ": section [" + name + "] appears twice: merge them");
      f.sections.push_back({name, line, {}});
      continue;
    }
    const auto eq = s.find('=');
    if (eq == std::string::npos) throw_bad_input(f.where(line) + ": expected 'key = value' (got '" + s + "')");
    if (f.sections.empty()) throw_bad_input(f.where(line) + ": 'key = value' before any [section]: add a section header above it");
    IniEntry e{trim(s.substr(0, eq)), trim(s.substr(eq + 1)), line};
    if (!valid_name(e.key)) throw_bad_input(f.where(line) + ": key '" + e.key + "' may use letters, digits, _ - . only");
    auto& sec = f.sections.back();
    if (sec.find(e.key)) throw_bad_input(f.where(line) + ": '" + e.key + "' is set twice in [" + sec.name + "]: keep one");
    sec.entries.push_back(std::move(e));
  }
  return f;
}

IniFile read_ini(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw_bad_input(path + ": is a directory: give the INI file itself (e.g. jobs/profiles/generic.ini, jobs/matrix.ini)");
  std::ifstream in(path);
  if (!in) throw_bad_input(path + ": cannot read this file: check the path");
  constexpr size_t kMaxBytes = 1 << 20;  // profiles and matrices are a few KiB
  const std::optional<std::string> text = read_at_most(in, kMaxBytes);
  if (!text) throw_bad_input(path + ": larger than 1 MiB: not a dlperf-jobs INI file");
  if (in.bad()) throw_bad_input(path + ": cannot read this file: check the path");
  return parse_ini(*text, path);
}

}  // namespace dlperf::jobs
