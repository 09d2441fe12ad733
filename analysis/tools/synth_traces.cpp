// dlperf-synth-traces OUT.h5 RUNS RANKS ITERATIONS: writes RUNS synthetic complete runs
// (lockstep timings, see trace/synthetic_run.h) spread over 1n1g..4n8g-style scale points,
// for the dlperf-reduce benchmark (bench/reduce_bench.sh). Not installed.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "core/error.h"
#include "trace/synthetic_run.h"
#include "trace/trace_writer.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: dlperf-synth-traces OUT.h5 RUNS RANKS ITERATIONS\n";
    return 2;
  }
  try {
    const std::string out = argv[1];
    const long runs = std::atol(argv[2]), ranks = std::atol(argv[3]), iterations = std::atol(argv[4]);
    std::vector<dlperf::RunRecord> batch;
    for (long k = 0; k < runs; ++k) {
      dlperf::SyntheticRunSpec spec;
      spec.info.model = k % 2 ? "resnet50" : "bert_base";
      spec.info.precision = "fp32";
      spec.info.backend = "cpu";
      spec.info.batch_per_device = 64;
      spec.info.nodes = ranks >= 8 ? ranks / 8 : 1;
      spec.info.devices_per_node = ranks >= 8 ? 8 : ranks;
      spec.info.world_size = ranks;
      spec.info.repeat_index = k / 2;
      spec.info.warmup = 20;
      spec.info.status = dlperf::RunStatus::complete;
      spec.iterations = iterations;
      spec.step_seconds = 0.1 + 0.001 * static_cast<double>(k % 7);
      spec.slow_rank = k % 5 == 0 ? 3 : -1;
      spec.slow_extra = 0.01;
      batch.push_back(dlperf::make_synthetic_run(spec));
      if (batch.size() == 100 || k + 1 == runs) {  // one locked update per 100 runs
        dlperf::append_runs(out, batch);
        batch.clear();
      }
    }
  } catch (const dlperf::Error& e) {
    std::cerr << "dlperf-synth-traces: " << e.what() << '\n';
    return 2;
  }
  return 0;
}
