#include "jobs/generate.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "jobs/ini.h"
#include "jobs/job_spec.h"
#include "jobs/jobs_error.h"
#include "jobs/sbatch_script.h"

namespace fs = std::filesystem;

namespace dlperf::jobs {
namespace {

std::string file_name(const std::string& path) { return fs::path(path).filename().string(); }

[[noreturn]] void throw_io(const std::string& what) { throw JobsError(JobsErrorKind::io, what); }

}  // namespace

std::vector<GeneratedFile> generate_files(const GenerateConfig& cfg, std::vector<std::string>* notes) {
  if (cfg.profile_path.empty()) throw_bad_input("--profile is required: a cluster profile such as jobs/profiles/generic.ini");
  if (cfg.matrix_path.empty()) throw_bad_input("--matrix is required: a job matrix such as jobs/matrix.ini");
  const Profile profile = load_profile(read_ini(cfg.profile_path));
  const Matrix matrix = load_matrix(read_ini(cfg.matrix_path));
  const std::vector<JobSpec> jobs = expand_jobs(profile, matrix);
  const std::vector<CommJob> comm = expand_comm_jobs(profile, matrix);
  if (notes) *notes = profile_notes(profile, jobs);
  const Provenance from{file_name(cfg.profile_path), file_name(cfg.matrix_path)};
  std::vector<GeneratedFile> files;
  for (const auto& j : jobs) files.push_back({j.name + ".sh", render_sbatch(profile, j, from)});
  for (const auto& j : comm) files.push_back({j.name + ".sh", render_comm_sbatch(profile, matrix, j, from)});
  files.push_back({"reduce.sh", render_reduce(profile, matrix, from)});
  files.push_back({"submit_all.sh", render_submit_all(jobs, comm, from)});
  return files;
}

void write_files(const std::string& dir, const std::vector<GeneratedFile>& files) {
  if (dir.empty())
    throw_bad_input("--output-dir is required: the directory to write the scripts to (e.g. my-jobs; jobs to replace the committed "
                    "ones), or --list");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw_io(dir + ": cannot create the output directory: " + ec.message());
  if (::access(dir.c_str(), W_OK | X_OK) != 0) throw_io(dir + ": cannot write into the output directory: " + std::strerror(errno));
  // Every file goes to a temporary name first; only when all are written are they renamed.
  // A target that is a folder (or anything not a file) would fail its rename after others were
  // renamed: a half-replaced set of scripts. Refused before anything is written.
  for (const auto& f : files) {
    const fs::path target = fs::path(dir) / f.name;
    const fs::file_status st = fs::symlink_status(target, ec);
    if (!ec && fs::exists(st) && !fs::is_regular_file(st) && !fs::is_symlink(st))
      throw_bad_input(target.string() + " exists and is not a file: remove it or choose another --output-dir");
  }
  std::vector<fs::path> temps;
  const auto cleanup = [&]() {
    std::error_code ignored;  // the caller's error code stays the error to report
    for (const auto& t : temps) fs::remove(t, ignored);
  };
  for (const auto& f : files) {
    const fs::path tmp = fs::path(dir) / ("." + f.name + ".tmp" + std::to_string(::getpid()));
    temps.push_back(tmp);
    errno = 0;
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    int err = out ? 0 : errno;  // the open's reason, before anything else can change errno
    if (out) {
      out << f.text;
      out.close();
      err = out ? 0 : (errno ? errno : EIO);
    }
    if (err != 0) {
      cleanup();
      throw_io(tmp.string() + ": cannot write: " + std::strerror(err));
    }
    fs::permissions(tmp, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec,
                    ec);
  }
  for (size_t i = 0; i < files.size(); ++i) {
    fs::rename(temps[i], fs::path(dir) / files[i].name, ec);
    if (ec) {
      cleanup();
      throw_io((fs::path(dir) / files[i].name).string() + ": cannot rename into place: " + ec.message());
    }
  }
}

}  // namespace dlperf::jobs
