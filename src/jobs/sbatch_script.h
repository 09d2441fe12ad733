// The text of the generated files: one sbatch script per JobSpec, the final reduce job and
// submit_all.sh. Pure functions of their inputs (no dates, no absolute paths), so the
// committed jobs/ can be compared byte for byte with a fresh generation.
#pragma once

#include <string>
#include <vector>

#include "jobs/job_spec.h"

namespace dlperf::jobs {

// What every generated file says about where it came from ("profile.ini and matrix.ini").
struct Provenance {
  std::string profile, matrix;  // file names as given to dlperf-jobs, without directories
};

std::string render_sbatch(const Profile& p, const JobSpec& j, const Provenance& from);
// comm_<tag>.sh (GPUs, NCCL) or comm_cpu_<tag>.sh (MPI, host buffers): one dlperf-comm allreduce
// run writing results.d/<job>_<job id>.comm.
std::string render_comm_sbatch(const Profile& p, const Matrix& m, const CommJob& j, const Provenance& from);
// reduce.sh: one task, prints the tables and writes CSV/JSON/SVG next to the results.
std::string render_reduce(const Profile& p, const Matrix& m, const Provenance& from);
// submit_all.sh: submits the job scripts one after another (each --dependency=afterany on the
// previous; --concurrent: all at once), then reduce.sh with --dependency=afterany:<all ids>.
// Selectors gpu, cpu, data, comm (the fabric-health jobs) and all (comm, gpu, cpu).
std::string render_submit_all(const std::vector<JobSpec>& jobs, const std::vector<CommJob>& comm, const Provenance& from);

}  // namespace dlperf::jobs
