// The dlperf-train arguments a generated script runs, built in one place: render_sbatch()
// writes them and load_matrix() checks them with dlperf-train's own option parser
// (train/options.h, linked into dlperf-jobs), so a bad extra_args entry, or one that clashes
// with what the job itself passes (--variant real_data), is found when the scripts are
// generated, not when a queued job finally starts and fails.
#pragma once

#include <string>
#include <vector>

#include "jobs/job_spec.h"

namespace dlperf::jobs {

struct TrainArg {
  std::string script;     // as written in the script ("\"$SLURM_CPUS_PER_TASK\"")
  std::string check;      // a value it takes when the job runs, for the parser ("4")
  bool new_line = false;  // the script continues the command on a new line before it
};

// The arguments after `dlperf-train`, in order, for job `j` (its model, backend, precision,
// batch, iterations, warm-up, real data and extra_args).
std::vector<TrainArg> job_train_arguments(const JobSpec& j);

// dlperf-train's one-line reason to refuse `args` (without the program name); "" if it would run.
std::string train_arguments_error(const std::vector<std::string>& args);
// The same for a job's arguments, with their check values.
std::string train_arguments_error(const std::vector<TrainArg>& args);

}  // namespace dlperf::jobs
