// The training loop: data -> forward -> loss -> backward -> (gradient exchange) -> optimizer.
//
// Nothing in a steady-state step makes the host wait for the device (issue 13): the step is
// queued, then the previous step is *retired* — its timestamps, loss and step-gate values are
// read back through the backend's StepRecorder (CUDA events and pinned copies; the clock on
// the CPU), its gradient buckets are checked complete (bounded by the communicator's
// timeout), and its IterationTiming is recorded. So the device always has the next step
// queued while the host reads, and the loss is printed a step late. Loss scaling, the skip
// decision and gradient clipping stay on the device in the step gate (backend/step_gate.h).
//
// Backward reports each layer whose gradients are final to the GradientExchange (the
// bucketed allreduce); after backward the compute queue is ordered after the buckets still
// in flight — that wait is the exposed communication.
//
// With TrainConfig::grad_accum = N the step runs N micro-batches (data, forward, backward)
// before one optimizer step: micro-batches 1..N-1 add their gradients into an accumulator
// (Backend::accumulate), and the last one adds the accumulator into each layer's gradients as
// backward reports the layer final, so the exchange sees the sum and starts each bucket as it
// does without accumulation: gradients are communicated once per step, on the last micro-batch.
// The step gate's grad_scale becomes 1 / (world x N): the average over the global batch.
//
// With TrainConfig::cuda_graph the step is captured once, at the last warm-up iteration, as
// graph segments cut at the host's actions, and replayed from then on (train/step_graph.h).
#pragma once

#include <chrono>
#include <functional>
#include <iosfwd>
#include <memory>

#include "core/error.h"
#include "models/model.h"
#include "trace/run_record.h"
#include "core/error.h"
#include "train/feed/data_source.h"
#include "train/feed/input_stage.h"
#include "train/optim/optimizer.h"
#include "train/param_store.h"

namespace dlperf {

class OpProfiler;

class GradientExchange {
 public:
  virtual ~GradientExchange() = default;
  virtual int world_size() const = 0;
  virtual size_t bucket_count() const = 0;
  // Host bookkeeping only (no device work): a new step's buckets are all pending.
  // With reduces_each_micro_batch(), called before every micro-batch's backward (the same step).
  virtual void begin_step(int64_t step) = 0;
  // True: the exchange reduces every micro-batch of a --grad-accum step and sums them itself
  // (ZeRO-2, whose full gradients do not outlive a micro-batch): the trainer reports every
  // micro-batch's layers, calls finish() after each, and keeps no accumulation buffer. False:
  // only the last micro-batch is reported, after the trainer added the earlier ones' sum.
  virtual bool reduces_each_micro_batch() const { return false; }
  virtual void on_ready(const Layer& layer) = 0;  // called inside backward
  // Called inside backward before it first writes `layer`'s gradients (Model's write hook):
  // ZeRO-2 commits them here, so a GPU's freed chunks are mapped before anything writes them.
  virtual void before_write(const Layer& layer) { (void)layer; }
  // Called inside forward before it first reads `layer`'s parameters (Model's read hook), and
  // after every forward: ZeRO's all-gather of the new weights runs into the next forward, and
  // each layer waits here for its own (train/parallel/zero.h).
  virtual void before_read(const Layer& layer) { (void)layer; }
  virtual void after_forward() {}
  // Exposed communication outside finish(): the exchange calls `marker(true, phase)` right
  // before it makes the compute queue wait for a collective inside forward or the optimizer
  // step (ZeRO's all-gathers) and `marker(false, phase)` right after; the trainer moves the
  // time between the two marks from `phase` to Phase::comm_exposed. Empty: no marks.
  using WaitMarker = std::function<void(bool begin, Phase phase)>;
  virtual void set_wait_marker(WaitMarker marker) { (void)marker; }
  // After backward: starts any bucket not started yet and orders the compute queue after all
  // of this step's buckets (a device communicator: without waiting on the host).
  virtual void finish() = 0;
  // After a fault, before the step's device memory is freed: the communicator ends what is in
  // flight (Communicator::abort_in_flight; NCCL is aborted). The exchange is unusable afterwards.
  virtual void abort_in_flight() {}
  // The host's check that `step`'s buckets completed, bounded by the communicator's timeout;
  // throws Error(fault). Called when the step is retired.
  virtual void complete(int64_t step) = 0;
  // A fault check while the host waits for the device (a peer that died); throws Error(fault).
  virtual void poll() {}
  // When each bucket of `step` was in flight (after complete(step)); device events are read
  // through `recorder` (valid after recorder.read(step)).
  virtual std::vector<BucketTime> timings(int64_t step, StepRecorder& recorder) = 0;
  // The sum of squares of every gradient in the backend's memory, formed by finish() when the
  // gradients are sharded (clipping by the global norm); null when the step gate can sum the
  // whole flat gradient buffer itself (replicated).
  virtual const double* gate_sq_sum() const { return nullptr; }
  // Bytes this rank moved in `step`'s collectives, as a ring moves them (IterationTiming::comm_bytes).
  virtual int64_t bytes_moved(int64_t step) = 0;
  // Graph capture (train/step_graph.h): the exchange hands every piece of work it queues on
  // the device (a bucket's start, finish()'s ordering) to `actor`, which runs it at once
  // (eager steps) or records it to run between graph segments on every replay. Empty: run at
  // once.
  using Actor = std::function<void(std::function<void()> work)>;
  virtual void set_actor(Actor actor) = 0;
};

// fp16 loss scaling (mixed precision): the loss gradient is multiplied by the scale so small
// gradients survive fp16, and the optimizer divides it out. Dynamic (NVIDIA apex's scheme):
// a step whose gradients hold inf/nan is skipped and the scale halved; after `growth_interval`
// good steps the scale doubles. All of it happens on the device (the step gate).
enum class LossScaling : uint8_t { none, fixed, dynamic };
const char* to_string(LossScaling s);
struct LossScaleConfig {
  LossScaling mode = LossScaling::none;
  float initial = 65536.0f;
  int64_t growth_interval = 2000;
};

struct TrainConfig {
  int64_t iterations = 120;   // warm-up included
  int64_t warmup = 20;        // not counted in the throughput
  int64_t print_every = 10;   // 0: no progress lines
  LrSchedule lr;
  LossScaleConfig loss_scale;
  InputMode input = InputMode::automatic;
  bool cuda_graph = false;    // capture the step at the last warm-up iteration and replay it
  int64_t grad_accum = 1;     // micro-batches per optimizer step (--grad-accum)
  std::chrono::milliseconds timeout{60'000};  // bound on the host's wait for a step to finish
  OpProfiler* profiler = nullptr;  // --profile-ops: told the phase each op call runs in
  // Divergence: the run fails when the loss is NaN/Inf, or exceeds max_loss_growth times
  // max(first loss, 1) (0: only NaN/Inf). A loss that explodes while staying finite (a huge
  // --lr) would otherwise be reported as a normal run with a normal throughput.
  double max_loss_growth = 10;
};

// What every rank must decide together at an iteration boundary (before each iteration and
// after the last): stop early (a signal) or fail (the loss diverged on some rank). Ranks that
// decided apart would leave one rank waiting in an allreduce for another that has left.
struct BoundaryFlags {
  bool stop = false;
  bool diverged = false;
  // In: this rank saw a stop signal. Agreed: how many ranks saw one.
  int signalled_ranks = 0;
};

using IterationFn = std::function<void(const RankTrace&)>;  // after each iteration (periodic trace flush)
// Combines this rank's flags with every rank's (an allreduce in a distributed run, adding
// the stop signal); empty: this rank decides alone and never stops early.
using BoundaryFn = std::function<BoundaryFlags(const BoundaryFlags& mine)>;

// The loss diverged (here, or on another rank): thrown on every rank at the same boundary.
class DivergedError : public Error {
 public:
  DivergedError(const std::string& what, bool here) : Error(ErrorKind::fault, what), here_(here) {}
  bool here() const { return here_; }  // this rank saw it (else another rank did)

 private:
  bool here_;
};

// Seconds on this process's steady clock.
double steady_seconds();

class Trainer {
 public:
  // grads: the flat gradient buffer, needed when the optimizer clips or loss scaling is
  // dynamic (the step gate inspects it). store: the flat buffers, needed with grad_accum > 1
  // (each layer's gradient range).
  Trainer(Model& model, Backend& be, Optimizer& opt, TrainConfig cfg, Buffer* grads = nullptr, const ParamStore* store = nullptr);
  ~Trainer();

  // Runs the iterations, appending to trace. At each iteration boundary asks `boundary` (may
  // be empty): on stop, returns early and trace holds what was measured; on divergence,
  // throws DivergedError (trace holds the diverging iteration). progress may be null (ranks
  // other than 0). The data phase is the time the step waits for its input: the source's
  // next() (the loader's queue) and the copy into the model's input tensors.
  void run(DataSource& data, GradientExchange* exchange, RankTrace& trace, const BoundaryFn& boundary,
           std::ostream* progress, const IterationFn& after_iteration = {});

  InputMode input_mode() const { return input_mode_; }  // after run()
  int64_t device_memory_peak_bytes() const { return device_peak_; }  // highest used seen by the device, sampled per step

 private:
  struct Run;

  Model& model_;
  Backend& be_;
  Optimizer& opt_;
  TrainConfig cfg_;
  Buffer* grads_;
  const ParamStore* store_;
  InputMode input_mode_ = InputMode::automatic;
  int64_t device_peak_ = 0;
};

// Throughput over the measured window: samples after warm-up / (end of the last iteration -
// end of the last warm-up iteration). 0 when the window is empty. samples_per_iteration
// counts every micro-batch (batch x grad_accum).
double window_throughput(const RankTrace& t, int64_t warmup, int64_t samples_per_iteration);

}  // namespace dlperf
