// The dlperf-train arguments a generated script runs, checked with dlperf-train's own option
// parser (train/options.h, linked into dlperf-jobs): a bad extra_args entry is found when
// the scripts are generated, not when a queued job finally starts and fails.
#pragma once

#include <string>
#include <vector>

namespace dlperf::jobs {

// The arguments render_sbatch() gives dlperf-train, with stand-ins for the values only the
// job knows (threads: 1, output: results.h5, repeat index: 0).
std::vector<std::string> train_arguments(const std::string& train_model, bool gpu, const std::string& precision,
                                         int batch_per_device, int iterations, int warmup,
                                         const std::vector<std::string>& extra_args);

// dlperf-train's one-line reason to refuse `args` (without the program name); "" if it would run.
std::string train_arguments_error(const std::vector<std::string>& args);

}  // namespace dlperf::jobs
