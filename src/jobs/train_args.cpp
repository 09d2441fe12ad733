#include "jobs/train_args.h"

#include <sstream>

#include "core/error.h"
#include "train/options.h"

namespace dlperf::jobs {

std::vector<TrainArg> job_train_arguments(const JobSpec& j) {
  const bool gpu = j.config.backend == Backend::cuda;
  std::vector<TrainArg> a;
  const auto add = [&](const std::string& script, bool new_line = false, const std::string& check = "") {
    a.push_back({script, check.empty() ? script : check, new_line});
  };
  const auto opt = [&](const std::string& flag, const std::string& value, bool new_line = false) {
    add(flag, new_line);
    add(value);
  };
  opt("--model", j.model->train_model);
  opt("--backend", gpu ? "cuda" : "cpu");
  opt("--precision", j.precision);
  opt("--batch-size", std::to_string(j.batch_per_device), true);
  opt("--iterations", std::to_string(j.iterations));
  opt("--warmup", std::to_string(j.warmup));
  // Stand-ins for what only the running job knows: the task's cores, the data set's path (a
  // shard pattern, which dlperf-train does not look for before it starts), the results file.
  const std::string data = "/dlperf-data/train-{000000..000001}.tar";
  if (!j.real_data) {
    add("--threads");
    add("\"$SLURM_CPUS_PER_TASK\"", false, "4");
  } else if (gpu) {
    // Real data on GPUs: every core of the task decodes.
    add("--data", true);
    add("\"$DLPERF_DATA\"", false, data);
    opt("--variant", "real_data");
    add("--loader-threads");
    add("\"$SLURM_CPUS_PER_TASK\"", false, "4");
  } else {
    // On the CPU backend one core decodes (~1,000 ImageNet images/s, far above a socket's
    // training rate) and the rest compute.
    add("--data", true);
    add("\"$DLPERF_DATA\"", false, data);
    opt("--variant", "real_data");
    add("--threads");
    add("$((SLURM_CPUS_PER_TASK > 1 ? SLURM_CPUS_PER_TASK - 1 : 1))", false, "3");
    opt("--loader-threads", "1");
  }
  // CPU-backend ranks pin their compute threads, one per core of the task (the job asks for
  // one hardware thread per core: --threads-per-core=1 in render_sbatch).
  if (!gpu) add("--pin-threads");
  for (size_t i = 0; i < j.extra_args.size(); ++i) add(j.extra_args[i], i == 0);
  add("--output", true);
  add("\"$results\"", false, "results.h5");
  add("--repeat-index");
  add("\"$i\"", false, "0");
  return a;
}

std::string train_arguments_error(const std::vector<std::string>& args) {
  std::vector<const char*> argv = {"dlperf-train"};
  for (const auto& a : args) argv.push_back(a.c_str());
  TrainOptions o;
  std::ostringstream printed;  // --help or --version would print here
  try {
    if (parse_train_options(static_cast<int>(argv.size()), argv.data(), o, printed) == ParseOutcome::exit_ok)
      return "--help and --version make dlperf-train print and exit, not train";
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string train_arguments_error(const std::vector<TrainArg>& args) {
  std::vector<std::string> values;
  for (const auto& a : args) values.push_back(a.check);
  return train_arguments_error(values);
}

}  // namespace dlperf::jobs
