// The training loop (see trainer.h for the design: queue step n, then retire step n-1).
#include "train/trainer.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ostream>

#include "core/error.h"
#include "core/on_unwind.h"
#include "train/parallel/gradient_exchange.h"
#include "train/measure/op_profile.h"
#include "train/step_graph.h"

namespace dlperf {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

const char* to_string(LossScaling s) {
  switch (s) {
    case LossScaling::none: return "none";
    case LossScaling::fixed: return "fixed";
    case LossScaling::dynamic: return "dynamic";
  }
  return "?";
}

namespace {
std::string format_eta(double seconds) {
  const auto s = static_cast<long>(std::max(0.0, seconds));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  return buf;
}

// Where a step's readings are: mark and value indices, the same in every step except for the
// per-op profile's marks in between.
struct MicroIndex {
  int data = -1, forward = -1, backward = -1;  // marks after each phase of one micro-batch
  int comm = -1;  // after its own reduction (an exchange that reduces each micro-batch), else -1
  int loss = -1;  // first of its loss terms
};
struct StepIndex {
  int begin = -1, comm = -1, optimizer = -1;
  // Exposed waits for collectives inside another phase (ZeRO's all-gathers: GradientExchange::
  // set_wait_marker): the marks around each, and the phase they are taken out of.
  struct Wait {
    int begin = -1, end = -1;
    Phase phase = Phase::forward;
  };
  std::vector<Wait> waits;
  std::vector<MicroIndex> micro;  // one per micro-batch (--grad-accum), in order
  int scale = -1;  // the loss scale this step's backward used
  int skip = -1;   // the gate's decision
  float host_loss = 0;  // models without loss_terms(): read synchronously, summed over micro-batches
};
}  // namespace

Trainer::Trainer(Model& model, Backend& be, Optimizer& opt, TrainConfig cfg, Buffer* grads, const ParamStore* store)
    : model_(model), be_(be), opt_(opt), cfg_(cfg), grads_(grads), store_(store) {}
Trainer::~Trainer() = default;

// Everything one run() needs, so the step code below reads as the step.
struct Trainer::Run {
  Trainer& t;
  GradientExchange* exchange;
  int world;
  std::unique_ptr<Buffer> gate_buffer;
  float* gate = nullptr;
  StepGateUpdate update;
  LossGradScale grad_scale;
  std::unique_ptr<StepRecorder> recorder;
  std::unique_ptr<InputStage> input;
  std::vector<const float*> loss_terms;
  std::vector<Layer*> layers;
  // --grad-accum: the sum of the earlier micro-batches' gradients (flat, the store's size),
  // and which layers the last micro-batch's backward has reported (their sum is complete).
  std::unique_ptr<Buffer> accum;
  std::vector<const Layer*> reported;
  StepGraph graph;
  std::array<StepIndex, kRecorderDepth> index{};
  int64_t step = 0;  // the step being queued
  float lr = 0;      // its learning rate

  Run(Trainer& tr, GradientExchange* ex, DataSource& data)
      : t(tr), exchange(ex), world(ex ? ex->world_size() : 1), graph(tr.be_) {
    const auto& ls = t.cfg_.loss_scale;
    update.check_finite = ls.mode == LossScaling::dynamic;
    update.growth_interval = ls.growth_interval;
    update.clip_norm = t.opt_.clip_norm();
    // The average over the global batch: world ranks x grad_accum micro-batches.
    update.grad_scale = 1.0f / static_cast<float>(world * t.cfg_.grad_accum);
    DLPERF_ASSERT(t.grads_ || (!update.check_finite && update.clip_norm == 0.0f),
                  "dynamic loss scaling and clipping need the gradient buffer");
    std::vector<float> init(kGateFloats, 0.0f);
    init[gate_index(GateField::loss_scale)] = ls.mode == LossScaling::none ? 1.0f : ls.initial;
    init[gate_index(GateField::grad_scale)] = update.grad_scale / init[gate_index(GateField::loss_scale)];
    gate_buffer = t.be_.buffer(kGateFloats);
    gate_buffer->write(init);
    gate = gate_buffer->data();
    if (ls.mode != LossScaling::none) grad_scale = LossGradScale(1.0f, gate + gate_index(GateField::loss_scale));
    recorder = t.be_.step_recorder();
    input = make_input_stage(t.cfg_.input, t.model_, t.be_, data);
    loss_terms = t.model_.loss_terms();
    layers = t.model_.layers();  // once: not rebuilt inside the timed loop
    DLPERF_ASSERT(t.cfg_.grad_accum >= 1, "grad_accum counts micro-batches");
    if (t.cfg_.grad_accum > 1) {
      DLPERF_ASSERT(t.store_, "gradient accumulation needs the parameter store");
      if (t.cfg_.cuda_graph) throw_usage_error("--cuda-graph and --grad-accum exclude each other (a captured step holds one micro-batch)");
      if (!each_micro_batch()) accum = t.be_.buffer(t.store_->size());
    }
    if (t.cfg_.cuda_graph) {
      if (!t.be_.supports_graphs())
        throw_usage_error(std::string("--cuda-graph: the ") + to_string(t.be_.kind()) + " backend cannot capture graphs; use --backend cuda");
      if (!t.opt_.capturable())
        throw_usage_error("--cuda-graph: the " + t.opt_.name() + " optimizer reads values back to the host each step");
      if (loss_terms.empty()) throw_usage_error("--cuda-graph: the model does not expose its loss on the device");
      if (t.cfg_.profiler) throw_usage_error("--cuda-graph and --profile-ops exclude each other (graphs hide the ops)");
    }
    if (exchange) {
      exchange->set_actor([this](std::function<void()> work) { graph.act(std::move(work)); });
      exchange->set_wait_marker([this](bool begin, Phase p) {  // called inside the exchange's acts
        auto& waits = at(step).waits;
        if (begin) waits.push_back({recorder->mark(), -1, p});
        else waits.back().end = recorder->mark();
      });
      t.model_.set_gradient_write_hook([this](const Layer& l) { exchange->before_write(l); });
      t.model_.set_weight_read_hook([this](const Layer& l) { exchange->before_read(l); });
    }
  }
  ~Run() {
    if (exchange) {
      exchange->set_actor({});
      exchange->set_wait_marker({});
      t.model_.set_gradient_write_hook({});
      t.model_.set_weight_read_hook({});
    }
  }

  StepIndex& at(int64_t s) { return index[static_cast<size_t>(s % kRecorderDepth)]; }
  bool each_micro_batch() const { return exchange && exchange->reduces_each_micro_batch(); }
  void phase(Phase p) {
    if (t.cfg_.profiler) t.cfg_.profiler->set_phase(p);
  }

  // The step's work, queued on the backend (eagerly, or into the capture). Every host action is
  // inside graph.act(), which runs it now or records it for the replays; the closures read
  // `step` and `lr` when they run, so a replay acts for its own step.
  void queue_step() {
    graph.act([this] {
      StepIndex& ix = at(step);
      ix.micro.clear();
      ix.waits.clear();
      ix.host_loss = 0;
      ix.begin = recorder->mark();
      t.be_.fill(gate + gate_index(GateField::lr), 1, lr);
    });
    for (int64_t k = 0; k < t.cfg_.grad_accum; ++k) queue_micro_batch(k, k + 1 == t.cfg_.grad_accum);
    phase(Phase::comm_exposed);
    if (exchange) exchange->finish();
    graph.act([this] { at(step).comm = recorder->mark(); });
    phase(Phase::optimizer);
    std::span<const float> grads;
    if (t.grads_) grads = {t.grads_->data(), t.grads_->size()};
    if (exchange) update.sq_sum = exchange->gate_sq_sum();
    t.be_.update_step_gate(grads, gate, update);
    t.opt_.step(1.0f, 1.0f, gate);
    graph.act([this] {
      StepIndex& ix = at(step);
      ix.skip = recorder->value(gate + gate_index(GateField::skip));
      ix.optimizer = recorder->mark();
    });
  }

  // Micro-batch k of the step: its input, forward and backward. Only the last one reports
  // layers to the exchange; the earlier ones add their gradients into `accum`.
  void queue_micro_batch(int64_t k, bool last) {
    graph.act([this, k] {
      if (k > 0) input->prefetch();  // this micro-batch's input (the first one's was prefetched after the last step)
      input->deliver();
      at(step).micro.push_back({recorder->mark(), -1, -1, -1});
    });
    phase(Phase::forward);
    if (k == 0 && !t.opt_.refreshes_compute_weights()) t.be_.refresh_compute_weights(layers);
    t.model_.forward();
    if (exchange) exchange->after_forward();
    graph.act([this, k] {
      StepIndex& ix = at(step);
      MicroIndex& mi = ix.micro.back();
      if (loss_terms.empty()) {
        ix.host_loss += t.model_.loss();  // a model without loss_terms(): waits here
      } else {
        mi.loss = recorder->value(loss_terms[0]);
        for (size_t i = 1; i < loss_terms.size(); ++i) recorder->value(loss_terms[i]);
      }
      if (k == 0) ix.scale = recorder->value(gate + gate_index(GateField::loss_scale));
      mi.forward = recorder->mark();
    });
    const bool report = last || each_micro_batch();
    if (report && exchange) exchange->begin_step(step);
    phase(Phase::backward);
    reported.clear();
    t.model_.backward(grad_scale, [this, report](const Layer& l) {
      if (!report) return;
      if (accum) {  // this layer's gradients += the earlier micro-batches', before its bucket starts
        add_accumulated(l);
        reported.push_back(&l);
      }
      if (exchange) exchange->on_ready(l);
    });
    if (accum) {
      if (last) {
        for (const Layer* l : layers)  // layers backward did not report (none in practice)
          if (std::find(reported.begin(), reported.end(), l) == reported.end()) add_accumulated(*l);
      } else {
        t.be_.accumulate({accum->data(), accum->size()}, {t.grads_->data(), t.grads_->size()}, k == 0);
      }
    }
    graph.act([this] { at(step).micro.back().backward = recorder->mark(); });
    if (!last && each_micro_batch()) {  // this micro-batch's reduction, summed into the shard: exposed communication
      phase(Phase::comm_exposed);
      exchange->finish();
      graph.act([this] { at(step).micro.back().comm = recorder->mark(); });
    }
  }

  void add_accumulated(const Layer& l) {
    const auto [begin, end] = t.store_->range_of(l);
    if (end > begin) t.be_.accumulate({t.grads_->data() + begin, end - begin}, {accum->data() + begin, end - begin}, false);
  }

  // Reads step s back and turns it into its IterationTiming.
  IterationTiming retire(int64_t s) {
    if (exchange) exchange->complete(s);
    const StepReadings r = recorder->read(
        s, [this] { if (exchange) exchange->poll(); }, t.cfg_.timeout);
    const StepIndex& ix = at(s);
    const auto m = [&](int i) { return r.marks.at(static_cast<size_t>(i)); };
    IterationTiming it;
    it.start = m(ix.begin);
    it.end = m(ix.optimizer);
    auto set = [&](Phase p, int from, int to) { it.phase_seconds[static_cast<int>(p)] = static_cast<float>(m(to) - m(from)); };
    // Each phase summed over the micro-batches (one with --grad-accum 1).
    auto add = [&](Phase p, int from, int to) { it.phase_seconds[static_cast<int>(p)] += static_cast<float>(m(to) - m(from)); };
    int prev = ix.begin;
    float loss = 0;
    for (const MicroIndex& mi : ix.micro) {
      add(Phase::data, prev, mi.data);
      add(Phase::forward, mi.data, mi.forward);
      add(Phase::backward, mi.forward, mi.backward);
      prev = mi.backward;
      if (mi.comm >= 0) {
        add(Phase::comm_exposed, mi.backward, mi.comm);
        prev = mi.comm;
      }
      for (size_t i = 0; mi.loss >= 0 && i < loss_terms.size(); ++i) loss += r.values.at(static_cast<size_t>(mi.loss) + i);
    }
    add(Phase::comm_exposed, prev, ix.comm);
    set(Phase::optimizer, ix.comm, ix.optimizer);
    for (const StepIndex::Wait& w : ix.waits) {  // exposed communication inside forward or the optimizer step
      const auto d = static_cast<float>(m(w.end) - m(w.begin));
      it.phase_seconds[static_cast<int>(w.phase)] -= d;
      it.phase_seconds[static_cast<int>(Phase::comm_exposed)] += d;
    }
    // This rank's loss for the step: the mean over its micro-batches. The global batch's is the
    // mean over ranks (equal batches), which dlperf-train's summary prints; progress lines are rank 0's.
    it.loss = (loss_terms.empty() ? ix.host_loss : loss) / static_cast<float>(ix.micro.size());
    it.loss_scale = r.values.at(static_cast<size_t>(ix.scale));
    it.skipped = r.values.at(static_cast<size_t>(ix.skip)) != 0.0f;
    if (exchange) {
      it.buckets = exchange->timings(s, *recorder);
      it.comm_seconds = static_cast<float>(BucketedAllreduce::in_flight_seconds(it.buckets));
      it.comm_bytes = exchange->bytes_moved(s);
    }
    if (t.cfg_.profiler && t.cfg_.profiler->profiles(s)) t.cfg_.profiler->collect(s, r, 0.0);
    t.device_peak_ = std::max(t.device_peak_, t.be_.device_memory_used_bytes());
    return it;
  }
};

void Trainer::run(DataSource& data, GradientExchange* exchange, RankTrace& trace, const BoundaryFn& boundary,
                  std::ostream* progress, const IterationFn& after_iteration) {
  Run r(*this, exchange, data);
  // Unwinding from a fault (a peer gone, a step past --timeout, device memory still in use):
  // the exchange's communicator ends what is in flight before `r` goes, whose recorder waits for
  // the compute stream and whose buffers' frees wait for the device, either of which may wait
  // for a collective a peer never joins. Not when every rank stops together at a boundary
  // (DivergedError, below): nothing is in flight there, and the run goes on to record it.
  bool stopped_together = false;
  const OnUnwind abort_on_fault([&] {
    if (exchange && !stopped_together) exchange->abort_in_flight();
  });
  input_mode_ = r.input->mode();
  const int64_t capture_at = cfg_.cuda_graph ? std::max<int64_t>(1, cfg_.warmup - 1) : -1;
  const double run_start = steady_seconds();
  float first_loss = 0;
  std::string diverged;  // why this rank's loss diverged, "" while it has not
  // Every rank asks at the same boundaries, so every rank stops, or fails, at the same one. The
  // losses it judges are the retired steps' (a step late), so a diverging step is the last one
  // recorded when the DivergedError is thrown.
  const auto stop_here = [&]() {
    const BoundaryFlags mine{false, !diverged.empty()};
    const BoundaryFlags all = boundary ? boundary(mine) : mine;
    if (all.diverged) {
      stopped_together = true;
      throw DivergedError(diverged.empty() ? "the loss diverged on another rank (its message says how)" : diverged,
                          !diverged.empty());
    }
    return all.stop;
  };
  const auto judge = [&](int64_t s, float loss) {
    if (s == 0) first_loss = loss;
    const double limit = cfg_.max_loss_growth * std::max(1.0, static_cast<double>(first_loss));
    char why[200];
    if (!std::isfinite(loss))
      std::snprintf(why, sizeof why, "the loss became %g at iteration %lld: the run diverged; lower --lr or check the input",
                    static_cast<double>(loss), static_cast<long long>(s));
    else if (cfg_.max_loss_growth > 0 && loss > limit)
      std::snprintf(why, sizeof why,
                    "the loss grew to %.4g at iteration %lld, more than %g x its first value %.4g (--max-loss-growth): "
                    "the run diverged; lower --lr",
                    static_cast<double>(loss), static_cast<long long>(s), cfg_.max_loss_growth, static_cast<double>(first_loss));
    else
      why[0] = '\0';
    if (diverged.empty()) diverged = why;
  };
  const auto record = [&](int64_t s) {
    if (!diverged.empty()) return;  // the steps after a diverged one are not recorded (the run fails at the next boundary)
    IterationTiming retired = r.retire(s);
    judge(s, retired.loss);
    const DataStats ds = data.stats();
    retired.data_queue_depth = ds.queue_depth;
    retired.data_images = ds.images;
    retired.data_bytes_read = ds.bytes_read;
    trace.iterations.push_back(retired);
    const IterationTiming& t = trace.iterations.back();
    if (after_iteration) after_iteration(trace);
    if (progress && cfg_.print_every > 0 && ((s + 1) % cfg_.print_every == 0 || s + 1 == cfg_.iterations)) {
      // The period since the previous iteration's end (the host's work between steps included),
      // as the summary's median step and the window's throughput count it.
      const double step = t.end - (trace.iterations.size() > 1 ? trace.iterations[trace.iterations.size() - 2].end : t.start);
      const double rate = step > 0 ? static_cast<double>(model_.samples_per_step() * cfg_.grad_accum * r.world) / step : 0.0;
      const double elapsed = steady_seconds() - run_start;
      const double eta = elapsed / static_cast<double>(s + 1) * static_cast<double>(cfg_.iterations - s - 1);
      char line[200];
      // On several ranks the loss is rank 0's share of the batch (the summary gives the global one).
      std::snprintf(line, sizeof line, "iter %5lld/%lld  %s %8.4f  %9.2f samples/s  lr %.4g%s  eta %s\n",
                    static_cast<long long>(s + 1), static_cast<long long>(cfg_.iterations), r.world > 1 ? "rank 0 loss" : "loss",
                    static_cast<double>(t.loss), rate,
                    static_cast<double>(cfg_.lr.at(s)), t.skipped ? "  (skipped: inf/nan gradients)" : "",
                    format_eta(eta).c_str());
      *progress << line << std::flush;
    }
  };

  r.input->prime();
  int64_t queued = -1;  // the last step queued and not yet retired
  for (int64_t it = 0; it < cfg_.iterations; ++it) {
    if (stop_here()) break;
    r.step = it;
    r.lr = cfg_.lr.at(it);
    r.recorder->begin(it);
    if (cfg_.profiler) cfg_.profiler->begin_step(it, cfg_.profiler->profiles(it) ? r.recorder.get() : nullptr);
    if (r.graph.state() == StepGraph::State::ready) {
      if (exchange) exchange->begin_step(it);
      r.graph.replay();
    } else if (it == capture_at) {
      r.graph.begin_capture();
      r.queue_step();
      r.graph.end_capture();
      if (exchange) exchange->begin_step(it);  // the capture's bookkeeping ran; the replay starts afresh
      r.graph.replay();
    } else {
      r.queue_step();
    }
    if (it + 1 < cfg_.iterations) r.input->prefetch();  // the next batch moves while this step runs
    if (queued >= 0) record(queued);  // the previous step, a step late
    queued = it;
  }
  if (queued >= 0) record(queued);
  stop_here();  // after the last step: a divergence there fails every rank alike
}

double window_throughput(const RankTrace& t, int64_t warmup, int64_t samples_per_iteration) {
  const auto n = static_cast<int64_t>(t.iterations.size());
  if (n <= warmup || n == 0) return 0.0;
  const double begin = warmup > 0 ? t.iterations[static_cast<size_t>(warmup - 1)].end : t.iterations.front().start;
  const double end = t.iterations.back().end;
  return end > begin ? static_cast<double>((n - warmup) * samples_per_iteration) / (end - begin) : 0.0;
}

}  // namespace dlperf
