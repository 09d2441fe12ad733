// Synthetic run records with exactly known timings, for tests (hand-computed expected
// tables) and the dlperf-reduce benchmark. Every rank runs in lockstep: iteration i spans
// [i*step, (i+1)*step) on the common clock, so window throughput = batch*world/step.
#pragma once

#include <cstdint>

#include "trace/run_record.h"

namespace dlperf {

struct SyntheticRunSpec {
  RunInfo info;                 // model, precision, batch, nodes, devices_per_node, world_size, status...
  int64_t iterations = 120;     // recorded on every rank
  double step_seconds = 0.1;    // wall time of every iteration
  int64_t slow_rank = -1;       // this rank's compute takes `slow_extra` longer (others wait in comm)
  double slow_extra = 0;        // s, included in step_seconds
};

// Phases: data 5%, forward 30%, backward 45%, exposed comm 10%, optimizer 10% of the step;
// the slow rank moves `slow_extra` from exposed comm into forward.
RunRecord make_synthetic_run(const SyntheticRunSpec& spec);

}  // namespace dlperf
