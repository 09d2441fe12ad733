// dlperf-jobs' whole job: read and check the profile and the matrix, render every file in
// memory, then write them. Nothing is written unless everything was valid; each file is
// written to a temporary name in the output directory and renamed into place.
#pragma once

#include <string>
#include <vector>

namespace dlperf::jobs {

struct GenerateConfig {
  std::string profile_path, matrix_path;
  std::string output_dir;  // required to write: no default, so a checkout's committed jobs/ is replaced only when named
};

struct GeneratedFile {
  std::string name;  // relative to the output directory
  std::string text;
};

// Throws JobsError(bad_input) naming the file and line to fix.
// `notes`, when given, receives profile_notes' lines (a valid set that may not be what was meant).
std::vector<GeneratedFile> generate_files(const GenerateConfig& cfg, std::vector<std::string>* notes = nullptr);
// Throws JobsError(io); files already renamed into place stay (each is complete).
void write_files(const std::string& dir, const std::vector<GeneratedFile>& files);

}  // namespace dlperf::jobs
