// The CUDA StepRecorder (backend/recorder.h): marks are timing events on the compute stream,
// values are asynchronous copies of device floats into pinned host memory, kRecorderDepth
// slots of each, one per step in flight.
//
// From events to the host's steady clock. cudaEventElapsedTime gives the time between two
// completed events as the GPU measured it (about 0.5 us resolution); the absolute time of one
// event per step is needed to place the step on the clock the trace uses:
//   * when read() finds the step's last operation not yet complete and then sees it complete,
//     the host time of that moment is the event's time (within one polling round: a few
//     microseconds, or a nap once the wait has spun 200 us: 20 us asked, more with the kernel's
//     timer slack, tens of us against steps of ms): a fresh anchor. A
//     GPU-bound run — the host always waits — gets one every step.
//   * when the step had already completed (a host-bound run), the step is placed after the
//     previous step's last mark: its time plus the elapsed time between the two marks.
//   * the first reference comes from an anchor event synchronised at construction (before
//     the timed loop).
// Every other mark is placed relative to its step's last mark; only short spans are ever
// converted, so the float milliseconds of cudaEventElapsedTime lose nothing, and the GPU's and
// the host's clocks never drift apart by more than a step's length between anchors.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/ops.h"

namespace dlperf::cuda {
namespace {

// Values go to pinned chunks of this many floats, grown on demand (a step records one per loss
// term and micro-batch: BERT with --grad-accum 32 takes 66).
constexpr int kValueChunk = 64;
// read()'s wait for a step: spin this long, then look every kNap.
constexpr std::chrono::microseconds kSpinFor{200}, kNap{20};

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// ms between two completed timing events; NaN (with the runtime's error cleared) if either
// cannot be read.
double elapsed_ms(cudaEvent_t from, cudaEvent_t to) {
  float ms = 0.0f;
  const cudaError_t e = cudaEventElapsedTime(&ms, from, to);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return std::numeric_limits<double>::quiet_NaN();
  }
  return ms;
}

class CudaRecorder final : public StepRecorder {
 public:
  explicit CudaRecorder(Ctx ctx) : ctx_(std::move(ctx)), anchor_(Event::timing) {
    for (auto& s : slots_) {
      s.values.emplace_back(kValueChunk * sizeof(float));
      s.done = Event(Event::timing);
    }
    // The first reference: outside the timed loop, so a synchronisation costs nothing.
    DLPERF_CHECK(cudaEventRecord(anchor_.get(), ctx_->s()));
    DLPERF_CHECK(cudaEventSynchronize(anchor_.get()));
    ref_event_ = anchor_.get();
    ref_time_ = now_seconds();
  }

  ~CudaRecorder() override {
    // Copies into the pinned slots may still be queued.
    cudaStreamSynchronize(ctx_->s());
  }

  void begin(int64_t step) override {
    DLPERF_ASSERT(step > last_begun_, "recorder steps are begun in increasing order");
    DLPERF_ASSERT(last_read_ + kRecorderDepth > step, "recorder: a step is read before kRecorderDepth more are begun");
    Slot& s = slot(step);
    s.step = step;
    s.marks_used = 0;
    s.values_used = 0;
    s.anything = false;
    s.done_is_last = false;
    last_begun_ = step;
  }

  int mark() override {
    Slot& s = slot(last_begun_);
    if (s.marks_used == static_cast<int>(s.marks.size())) s.marks.emplace_back(Event::timing);  // grows while profiling starts
    DLPERF_CHECK(cudaEventRecord(s.marks[static_cast<size_t>(s.marks_used)].get(), ctx_->s()));
    s.anything = true;
    s.done_is_last = false;
    return s.marks_used++;
  }

  int value(const float* p) override {
    Slot& s = slot(last_begun_);
    const auto chunk = static_cast<size_t>(s.values_used / kValueChunk);
    // Every slot grows alike, in the first step that needs it (every step records as many), so
    // no pinned allocation comes later (a captured step's values are copied between segments).
    if (chunk == s.values.size())
      for (Slot& t : slots_) t.values.emplace_back(kValueChunk * sizeof(float));
    float* into = s.values[chunk].as<float>() + s.values_used % kValueChunk;
    DLPERF_CHECK(cudaMemcpyAsync(into, p, sizeof(float), cudaMemcpyDeviceToHost, ctx_->s()));
    DLPERF_CHECK(cudaEventRecord(s.done.get(), ctx_->s()));  // the step's last operation so far
    s.anything = true;
    s.done_is_last = true;
    return s.values_used++;
  }

  StepReadings read(int64_t step, const std::function<void()>& poll, std::chrono::milliseconds timeout) override {
    DLPERF_ASSERT(step > last_read_ && step <= last_begun_, "recorder steps are read once, in order");
    Slot& s = slot(step);
    DLPERF_ASSERT(s.step == step, "the step's slot is still its own");
    last_read_ = step;
    StepReadings out;
    if (!s.anything) return out;
    // The step's last operation: its last mark, or the done event recorded after a value copy
    // that came later.
    cudaEvent_t end = s.marks_used > 0 ? s.marks[static_cast<size_t>(s.marks_used - 1)].get() : nullptr;
    cudaEvent_t last = s.done_is_last || !end ? s.done.get() : end;
    double observed = std::numeric_limits<double>::quiet_NaN();
    wait(s, last, poll, timeout, observed);
    out.values.resize(static_cast<size_t>(s.values_used));
    for (int i = 0; i < s.values_used; ++i)
      out.values[static_cast<size_t>(i)] = s.values[static_cast<size_t>(i / kValueChunk)].as<float>()[i % kValueChunk];
    if (!end) return out;
    double end_time = 0;
    const double after_previous = ref_time_ + 1e-3 * elapsed_ms(ref_event_, end);
    if (std::isfinite(observed)) {
      end_time = observed - (last == end ? 0.0 : 1e-3 * elapsed_ms(end, last));  // a fresh anchor (see the top)
      // An anchor is late by however long the host took to see the event: one seen promptly after
      // one seen late would put this step's end before the previous one's. Never before it plus
      // the GPU's own elapsed time between them.
      if (std::isfinite(after_previous)) end_time = std::max(end_time, after_previous);
    } else {
      end_time = after_previous;
    }
    if (!std::isfinite(end_time)) end_time = now_seconds();  // never in practice: both events are complete
    out.marks.resize(static_cast<size_t>(s.marks_used));
    for (int i = 0; i < s.marks_used; ++i)
      out.marks[static_cast<size_t>(i)] = end_time - 1e-3 * elapsed_ms(s.marks[static_cast<size_t>(i)].get(), end);
    s.end_time = end_time;
    ref_event_ = end;  // valid until this slot is begun again, after the next read
    ref_time_ = end_time;
    return out;
  }

  double event_time(int64_t step, void* event) override {
    Slot& s = slot(step);
    if (s.step != step || step > last_read_ || s.marks_used == 0) return std::numeric_limits<double>::quiet_NaN();
    return s.end_time - 1e-3 * elapsed_ms(static_cast<cudaEvent_t>(event), s.marks[static_cast<size_t>(s.marks_used - 1)].get());
  }

 private:
  struct Slot {
    int64_t step = -1;
    std::vector<Event> marks;  // timing events, grown on demand
    int marks_used = 0;
    std::vector<PinnedMemory> values;  // chunks of kValueChunk floats, as many in every slot
    int values_used = 0;
    Event done;                // recorded after each value copy
    bool done_is_last = false; // the step's last operation was a value copy, not a mark
    bool anything = false;
    double end_time = 0;       // the last mark's time, after read()
  };
  Slot& slot(int64_t step) { return slots_[static_cast<size_t>(step % kRecorderDepth)]; }

  // Waits for `last`, bounded; `observed` is the host time of its completion when the wait saw
  // it happen (it was not complete at the first look).
  void wait(const Slot& s, cudaEvent_t last, const std::function<void()>& poll, std::chrono::milliseconds timeout,
            double& observed) {
    cudaError_t q = cudaEventQuery(last);
    if (q == cudaSuccess) return;
    const auto begun = std::chrono::steady_clock::now();
    const auto deadline = begun + timeout;
    while (q == cudaErrorNotReady) {
      if (poll) poll();  // a communicator's fault check: throws when a peer is gone
      const auto now = std::chrono::steady_clock::now();
      if (now > deadline)
        throw Error(ErrorKind::fault, "step " + std::to_string(s.step) + " did not finish on the GPU within " +
                                          std::to_string(timeout.count() / 1000) + " s (--timeout) (" + error_identity() + ")");
      // A GPU-bound run waits here most of every step: spin briefly, then sleep between looks, so
      // the wait does not take a core from the input pipeline. The anchor it gives is then late
      // by up to a nap (20 us asked, more with the kernel's timer slack: tens of microseconds
      // against steps of milliseconds); durations are the GPU's own elapsed times.
      if (now - begun < kSpinFor) std::this_thread::yield();
      else std::this_thread::sleep_for(kNap);
      q = cudaEventQuery(last);
    }
    DLPERF_CHECK(q);
    observed = now_seconds();
  }

  Ctx ctx_;
  Event anchor_;
  Slot slots_[kRecorderDepth];
  cudaEvent_t ref_event_ = nullptr;
  double ref_time_ = 0;
  int64_t last_begun_ = -1, last_read_ = -1;
};

}  // namespace

std::unique_ptr<StepRecorder> make_step_recorder(Ctx ctx) { return std::make_unique<CudaRecorder>(std::move(ctx)); }

}  // namespace dlperf::cuda
