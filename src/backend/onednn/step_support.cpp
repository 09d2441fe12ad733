// The CPU backend's side of a step without host synchronisation (backend/recorder.h,
// backend/step_gate.h). oneDNN's CPU stream runs every primitive to completion before the
// call returns, so the recorder simply reads the steady clock and values at once, and the step
// gate is plain host memory updated in place. The trainer drives both exactly as it drives the
// CUDA backend's, which is what lets the CPU tests exercise the whole protocol.
#include <chrono>
#include <cmath>
#include <limits>

#include "backend/onednn/ops.h"

namespace dlperf::onednn {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

class CpuRecorder final : public StepRecorder {
 public:
  explicit CpuRecorder(Ctx ctx) : ctx_(std::move(ctx)) {}

  void begin(int64_t step) override {
    DLPERF_ASSERT(step > last_begun_, "recorder steps are begun in increasing order");
    DLPERF_ASSERT(last_read_ + kRecorderDepth > step, "recorder: a step is read before kRecorderDepth more are begun");
    last_begun_ = step;
    slot(step) = {};
  }
  int mark() override {
    ctx_->stream.wait();  // no-op for in-order CPU streams; keeps the contract if that ever changes
    auto& s = slot(last_begun_);
    s.marks.push_back(now_seconds());
    return static_cast<int>(s.marks.size()) - 1;
  }
  int value(const float* p) override {
    auto& s = slot(last_begun_);
    s.values.push_back(*p);
    return static_cast<int>(s.values.size()) - 1;
  }
  StepReadings read(int64_t step, const std::function<void()>& poll, std::chrono::milliseconds) override {
    DLPERF_ASSERT(step > last_read_ && step <= last_begun_, "recorder steps are read once, in order");
    if (poll) poll();
    last_read_ = step;
    return slot(step);
  }
  double event_time(int64_t, void*) override { return std::numeric_limits<double>::quiet_NaN(); }

 private:
  StepReadings& slot(int64_t step) { return slots_[static_cast<size_t>(step % kRecorderDepth)]; }
  Ctx ctx_;
  StepReadings slots_[kRecorderDepth];
  int64_t last_begun_ = -1, last_read_ = -1;
};

}  // namespace

std::unique_ptr<StepRecorder> make_step_recorder(Ctx ctx) { return std::make_unique<CpuRecorder>(std::move(ctx)); }

void update_step_gate(std::span<const float> grads, float* gate, const StepGateUpdate& u) {
  auto at = [gate](GateField f) -> float& { return gate[gate_index(f)]; };
  const float used = at(GateField::loss_scale);
  double sq = 0.0;
  if ((u.check_finite || u.clip_norm > 0) && u.sq_sum) {
    sq = *u.sq_sum;
  } else if (u.check_finite || u.clip_norm > 0) {
    const float* p = grads.data();
    const auto n = static_cast<int64_t>(grads.size());
#pragma omp parallel for simd schedule(static) reduction(+ : sq)
    for (int64_t i = 0; i < n; ++i) sq += static_cast<double>(p[i]) * p[i];
  }
  if (u.check_finite && !std::isfinite(sq)) {
    at(GateField::skip) = 1.0f;
    at(GateField::loss_scale) = used * 0.5f;
    at(GateField::good_steps) = 0.0f;
    at(GateField::skipped) += 1.0f;
    return;
  }
  at(GateField::skip) = 0.0f;
  at(GateField::applied) += 1.0f;
  double m = static_cast<double>(u.grad_scale) / static_cast<double>(used);
  if (u.clip_norm > 0) {
    const double norm = std::sqrt(sq) * m;
    at(GateField::grad_norm) = static_cast<float>(norm);
    if (norm > u.clip_norm) m *= u.clip_norm / (norm + 1e-6);
  }
  at(GateField::grad_scale) = static_cast<float>(m);
  if (u.check_finite) {
    at(GateField::good_steps) += 1.0f;
    if (at(GateField::good_steps) >= static_cast<float>(u.growth_interval)) {
      at(GateField::loss_scale) = used * 2.0f;
      at(GateField::good_steps) = 0.0f;
    }
  }
}

}  // namespace dlperf::onednn
