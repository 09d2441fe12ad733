#include "jobs/train_args.h"

#include <sstream>

#include "core/error.h"
#include "train/options.h"

namespace dlperf::jobs {

std::vector<std::string> train_arguments(const std::string& train_model, bool gpu, const std::string& precision,
                                         int batch_per_device, int iterations, int warmup,
                                         const std::vector<std::string>& extra_args) {
  std::vector<std::string> a = {"--model",      train_model,         "--backend",  gpu ? "cuda" : "cpu",
                                "--precision",  precision,           "--batch-size", std::to_string(batch_per_device),
                                "--iterations", std::to_string(iterations), "--warmup", std::to_string(warmup),
                                "--threads",    "1"};
  a.insert(a.end(), extra_args.begin(), extra_args.end());
  a.insert(a.end(), {"--output", "results.h5", "--repeat-index", "0"});
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

}  // namespace dlperf::jobs
