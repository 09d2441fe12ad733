// The training loop: data -> forward -> loss -> backward -> (gradient exchange) -> optimizer,
// timed per phase with the steady clock around real work, recorded per iteration.
//
// Backward reports each layer whose gradients are final to the GradientExchange (the
// distributed issue's bucketed allreduce); after backward the loop waits for what is still
// in flight — that wait is the exposed communication.
#pragma once

#include <functional>
#include <iosfwd>

#include "core/error.h"
#include "models/model.h"
#include "trace/run_record.h"
#include "train/data_source.h"
#include "train/optimizer.h"

namespace dlperf {

class GradientExchange {
 public:
  virtual ~GradientExchange() = default;
  virtual int world_size() const = 0;
  virtual void begin_step() = 0;
  virtual void on_ready(const Layer& layer) = 0;  // called inside backward
  virtual void finish() = 0;                      // waits for every bucket of this step
  virtual double comm_seconds() const = 0;        // time buckets were in flight this step
};

// fp16 loss scaling (mixed precision): the loss gradient is multiplied by the scale so small
// gradients survive fp16, and the optimizer divides it out. Dynamic (NVIDIA apex's scheme):
// a step whose gradients hold inf/nan is skipped and the scale halved; after `growth_interval`
// good steps the scale doubles.
enum class LossScaling : uint8_t { none, fixed, dynamic };
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
  // grads: the flat gradient buffer, checked for inf/nan under dynamic loss scaling.
  Trainer(Model& model, Backend& be, Optimizer& opt, TrainConfig cfg, Buffer* grads = nullptr)
      : model_(model), be_(be), opt_(opt), cfg_(cfg), grads_(grads) {}

  // Runs the iterations, appending to trace. At each iteration boundary asks `boundary` (may
  // be empty): on stop, returns early and trace holds what was measured; on divergence,
  // throws DivergedError (trace holds the diverging iteration). progress may be null (ranks
  // other than 0). The data phase is the time the step waits for its input: the source's
  // next() (the loader's queue) and the copy into the model's input tensors.
  void run(DataSource& data, GradientExchange* exchange, RankTrace& trace, const BoundaryFn& boundary,
           std::ostream* progress, const IterationFn& after_iteration = {});

 private:
  bool gradients_finite();  // over the flat gradient buffer, after the exchange

  Model& model_;
  Backend& be_;
  Optimizer& opt_;
  TrainConfig cfg_;
  Buffer* grads_;
};

// Throughput over the measured window: samples after warm-up / (end of the last iteration -
// end of the last warm-up iteration). 0 when the window is empty.
double window_throughput(const RankTrace& t, int64_t warmup, int64_t samples_per_iteration);

}  // namespace dlperf
