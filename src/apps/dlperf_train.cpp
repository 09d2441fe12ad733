// dlperf-train: parse options into a config struct, run, report. Exit codes: 0 success,
// 2 bad input (one line on stderr, nothing written), 1 any other failure.
#include <iostream>

#include "core/error.h"
#include "train/options.h"
#include "train/run.h"

int main(int argc, char** argv) {
  using namespace dlperf;
  TrainOptions options;
  try {
    if (parse_train_options(argc, argv, options, std::cout) == ParseOutcome::exit_ok) return 0;
    RankTrace trace;
    run_training(options, std::cout, trace);
    return 0;
  } catch (const Error& e) {
    std::cerr << "dlperf-train: " << e.what() << '\n';
    return e.kind() == ErrorKind::usage ? 2 : 1;
  } catch (const std::exception& e) {
    std::cerr << "dlperf-train: " << e.what() << '\n';
    return 1;
  }
}
