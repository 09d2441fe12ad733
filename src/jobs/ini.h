// A small INI reader for dlperf-jobs' cluster profiles and job matrices (jobs/profiles/*.ini,
// jobs/matrix.ini; the format is documented in jobs/README.md):
//
//   # comment            ; comment
//   [section]
//   key = value          (value runs to the end of the line, surrounding blanks trimmed)
//
// Keys keep their case and file order; a key given twice in one section is an error, as is a
// line outside any section. Errors are JobsError with "file:line: what to fix".
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "jobs/jobs_error.h"

namespace dlperf::jobs {

struct IniEntry {
  std::string key;
  std::string value;
  int line = 0;
};

struct IniSection {
  std::string name;
  int line = 0;
  std::vector<IniEntry> entries;  // in file order

  const IniEntry* find(const std::string& key) const;
};

struct IniFile {
  std::string path;                  // as given, for messages
  std::vector<IniSection> sections;  // in file order

  const IniSection* find(const std::string& name) const;
  // "profile.ini:12" (line 0: just the file)
  std::string where(int line) const;
};

// Parses INI text; `path` only names the source in error messages.
IniFile parse_ini(const std::string& text, const std::string& path);
// Reads and parses a file; a missing or unreadable file is a JobsError naming it.
IniFile read_ini(const std::string& path);

}  // namespace dlperf::jobs
