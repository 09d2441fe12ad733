// dlperf-reduce's views of one step (issue 13): where a rank's step time goes.
//
//   --ops            for every run with a per-op profile (dlperf-train --profile-ops N): the
//                    top ops by time with their share of the step, then the time per kind.
//                    The step time is the mean wall time of the profiled iterations on the
//                    profiled rank; "ops" is the sum of every op's forward and backward time,
//                    so 1 - ops/step is what no op accounts for (the optimizer, the exposed
//                    communication, launch gaps).
//   --timeline FILE  one rank's step phases, op calls (profiled iterations only) and gradient
//                    allreduce buckets over a range of iterations, as Chrome trace-event JSON
//                    (opens in Perfetto, ui.perfetto.dev, or chrome://tracing): one track per
//                    kind, and as many allreduce tracks as buckets are ever in flight at once
//                    (complete 'X' slices on one track must nest or follow each other), times
//                    in microseconds from the first iteration shown, so overlap of
//                    communication with backward can be seen rather than inferred.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "trace/run_record.h"

namespace dlperf::analysis {

struct OpsOptions {
  int top = 15;  // rows of the top-ops table
};

// Throws Error(usage) when no run has a per-op profile.
void write_ops_report(std::ostream& out, const std::vector<RunRecord>& runs, const OpsOptions& opt);

struct TimelineOptions {
  std::string run;     // "run_000003" or its location "results.h5:/runs/run_000003"; "": the last run read
  int rank = 0;
  int64_t first = -1;  // iterations [first, last]; -1: the profiled iterations, else the last five
  int64_t last = -1;
};

// Parses "A-B" (inclusive, 0-based iterations) or "A" into opt.first/last; Error(usage) otherwise.
void parse_step_range(const std::string& text, TimelineOptions& opt);

// Throws Error(usage) when the run, rank or range does not exist.
void write_timeline(std::ostream& out, const std::vector<RunRecord>& runs, const TimelineOptions& opt);

}  // namespace dlperf::analysis
