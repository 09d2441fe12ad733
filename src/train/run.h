// One benchmark run of dlperf-train, from validated options to the printed summary.
#pragma once

#include <iosfwd>

#include "trace/run_record.h"
#include "train/options.h"

namespace dlperf {

struct RunSummary {
  double samples_per_s = 0;   // over the measured window
  int64_t measured_iterations = 0;
  int64_t parameter_count = 0;
  int64_t peak_memory_bytes = 0;
  float first_loss = 0, last_loss = 0;
};

// Builds backend, model, parameters and optimizer, trains, prints progress and the summary.
RunSummary run_training(const TrainOptions& o, std::ostream& out, RankTrace& trace);

}  // namespace dlperf
