// --profile-ops N: every op's forward and backward time over N measured steps, without
// touching a model line. make_profiling_backend() wraps a backend: every op it plans is
// wrapped in turn, and each call of a wrapped op (forward, backward, a weight refresh, a
// convert) is bracketed by two StepRecorder marks when the profiler is active — CUDA events
// on the compute stream on a GPU, the clock on the CPU — read back with the step a step later.
// The trainer tells the profiler which phase it is in, so an op's time is attributed to the
// phase its call ran in (ResNet's gradient adds run Add::forward inside backward).
//
// The table (trace/run_record.h, OpProfile) is stored in the run's trace group and read by
// dlperf-reduce --ops and --timeline. Profiled steps carry the marks' small overhead; they are
// part of the measured window like any other.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "trace/run_record.h"

namespace dlperf {

class OpProfiler {
 public:
  // Profiles iterations [first_iteration, first_iteration + steps).
  OpProfiler(int64_t first_iteration, int64_t steps);

  // ---- plan time (the profiling backend) ----
  int add_op(std::string name, std::string kind, std::string shape);  // row index
  std::string unnamed(const std::string& kind);                       // "add#3", counted per kind
  int convert_op(const Tensor& src, const Tensor& dst);               // one row per (dims, dtypes)

  // ---- the trainer ----
  bool profiles(int64_t iteration) const { return iteration >= first_ && iteration < first_ + steps_; }
  bool active() const { return recorder_ != nullptr; }  // the current step is being profiled
  void begin_step(int64_t iteration, StepRecorder* recorder);  // recorder null: not profiled
  void set_phase(Phase p) { phase_ = p; }
  // Adds the step's calls from its readings (times shifted by clock_offset to the common clock).
  void collect(int64_t iteration, const StepReadings& readings, double clock_offset);
  OpProfile result(int64_t rank) const;

  // ---- the wrapped ops ----
  struct Call {
    int op = 0;
    Phase phase = Phase::forward;
    bool counted = true;  // false: a weight refresh, timed but not a call
    int begin = 0, end = 0;  // mark indices
  };
  // Runs f, bracketed by two marks when the current step is profiled (not RAII: a mark can
  // throw, and a destructor must not).
  template <class F>
  void timed(int op, F&& f, bool counted = true) {
    if (!recorder_) return f();
    const int begin = recorder_->mark();
    f();
    pending_[current_slot_].push_back({op, phase_, counted, begin, recorder_->mark()});
  }

 private:
  int64_t first_, steps_;
  std::vector<OpProfileRow> rows_;
  std::vector<OpEvent> events_;
  std::vector<std::string> kinds_;   // per-kind counters for unnamed()
  std::vector<int> kind_counts_;
  std::vector<std::pair<std::string, int>> converts_;
  StepRecorder* recorder_ = nullptr;  // while the current step is profiled
  Phase phase_ = Phase::forward;
  std::vector<std::vector<Call>> pending_;  // per recorder slot: calls of a step not yet collected
  size_t current_slot_ = 0;
  int64_t collected_ = 0;
};

// A backend whose ops are wrapped for `profiler` (and whose other calls go to `inner`).
std::unique_ptr<Backend> make_profiling_backend(Backend& inner, OpProfiler& profiler);

}  // namespace dlperf
