// Synthetic runs with hand-picked step times, so expected throughputs are exact:
// throughput = batch * world / step (lockstep ranks, warm-up 20, window 100, 120 iterations).
// Every run records that plan (120 iterations, 20 of warm-up); `iterations` is how many it
// recorded, so fewer than 120 is a run cut short of its own window.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include "trace/synthetic_run.h"

namespace dlperf::test {

inline RunRecord run_at(const std::string& model, int64_t nodes, int64_t per_node, double step,
                        RunStatus status = RunStatus::complete, int64_t iterations = 120) {
  SyntheticRunSpec spec;
  spec.info.model = model;
  spec.info.precision = "fp32";
  spec.info.backend = "cpu";
  spec.info.batch_per_device = 32;
  spec.info.nodes = nodes;
  spec.info.devices_per_node = per_node;
  spec.info.world_size = nodes * per_node;
  spec.info.status = status;
  spec.iterations = iterations;
  spec.step_seconds = step;
  // Each call is another run (as each dlperf-train run has its own start time): equal
  // settings and timings are repeats, not one run read twice (run_identity.h).
  static int64_t runs_made = 0;
  spec.info.start_time_utc = "2026-11-25T12:00:00Z run " + std::to_string(++runs_made);
  RunRecord r = make_synthetic_run(spec);
  r.info.iterations = 120;
  r.info.warmup = 20;
  return r;
}

// A complete run of its own length: `iterations` planned and recorded, `warmup` of them warm-up.
inline RunRecord run_of_length(int64_t iterations, int64_t warmup, double step) {
  RunRecord r = run_at("resnet50", 1, 1, step, RunStatus::complete, iterations);
  r.info.iterations = iterations;
  r.info.warmup = warmup;
  return r;
}

class TempDir {
 public:
  TempDir() {
    std::string templ = (std::filesystem::temp_directory_path() / "dlperf-reduce-XXXXXX").string();
    path_ = ::mkdtemp(templ.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace dlperf::test
