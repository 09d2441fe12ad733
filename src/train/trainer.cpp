#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ostream>

#include "core/error.h"

namespace dlperf {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

namespace {
std::string format_eta(double seconds) {
  const auto s = static_cast<long>(std::max(0.0, seconds));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  return buf;
}
}  // namespace

void Trainer::run(DataSource& data, GradientExchange* exchange, RankTrace& trace, const BoundaryFn& boundary,
                  std::ostream* progress, const IterationFn& after_iteration) {
  const int world = exchange ? exchange->world_size() : 1;
  const bool scaling = cfg_.loss_scale.mode != LossScaling::none;
  DLPERF_ASSERT(cfg_.loss_scale.mode != LossScaling::dynamic || grads_, "dynamic loss scaling needs the gradient buffer");
  float loss_scale = scaling ? cfg_.loss_scale.initial : 1.0f;
  int64_t good_steps = 0;
  const GradReadyFn ready = [exchange](const Layer& l) {
    if (exchange) exchange->on_ready(l);
  };
  const std::vector<Layer*> layers = model_.layers();  // once: not rebuilt inside the timed loop
  const double run_start = steady_seconds();
  float first_loss = 0;
  std::string diverged;  // why this rank's loss diverged, "" while it has not
  const auto stop_here = [&]() {
    const BoundaryFlags mine{false, !diverged.empty()};
    const BoundaryFlags all = boundary ? boundary(mine) : mine;
    if (all.diverged)
      throw DivergedError(diverged.empty() ? "the loss diverged on another rank (its message says how)" : diverged,
                          !diverged.empty());
    return all.stop;
  };
  for (int64_t it = 0;; ++it) {
    if (stop_here() || it == cfg_.iterations) break;
    IterationTiming t;
    t.start = steady_seconds();
    model_.load(data.next());
    be_.synchronize();
    data.release();  // the model holds its own copy now
    double mark = steady_seconds();
    t.phase_seconds[static_cast<int>(Phase::data)] = static_cast<float>(mark - t.start);

    be_.refresh_compute_weights(layers);
    model_.forward();
    t.loss = model_.loss();
    double now = steady_seconds();
    t.phase_seconds[static_cast<int>(Phase::forward)] = static_cast<float>(now - mark);
    mark = now;

    if (exchange) exchange->begin_step();
    model_.backward(loss_scale, ready);
    be_.synchronize();
    now = steady_seconds();
    t.phase_seconds[static_cast<int>(Phase::backward)] = static_cast<float>(now - mark);
    mark = now;

    if (exchange) {
      exchange->finish();
      t.comm_seconds = static_cast<float>(exchange->comm_seconds());
    }
    now = steady_seconds();
    t.phase_seconds[static_cast<int>(Phase::comm_exposed)] = static_cast<float>(now - mark);
    mark = now;

    // Every rank sees the same summed gradients, so every rank makes the same decision.
    if (cfg_.loss_scale.mode == LossScaling::dynamic && !gradients_finite()) {
      loss_scale *= 0.5f;  // overflow: skip this step, retry smaller
      good_steps = 0;
    } else {
      opt_.step(cfg_.lr.at(it), 1.0f / (static_cast<float>(world) * loss_scale));
      if (cfg_.loss_scale.mode == LossScaling::dynamic && ++good_steps % cfg_.loss_scale.growth_interval == 0) loss_scale *= 2.0f;
    }
    be_.synchronize();
    t.end = steady_seconds();
    t.phase_seconds[static_cast<int>(Phase::optimizer)] = static_cast<float>(t.end - mark);
    if (it == 0) first_loss = t.loss;
    const double limit = cfg_.max_loss_growth * std::max(1.0, static_cast<double>(first_loss));
    char why[200];
    if (!std::isfinite(t.loss))
      std::snprintf(why, sizeof why, "the loss became %g at iteration %lld: the run diverged; lower --lr or check the input",
                    static_cast<double>(t.loss), static_cast<long long>(it));
    else if (cfg_.max_loss_growth > 0 && t.loss > limit)
      std::snprintf(why, sizeof why,
                    "the loss grew to %.4g at iteration %lld, more than %g x its first value %.4g (--max-loss-growth): "
                    "the run diverged; lower --lr",
                    static_cast<double>(t.loss), static_cast<long long>(it), cfg_.max_loss_growth, static_cast<double>(first_loss));
    else
      why[0] = '\0';
    if (diverged.empty()) diverged = why;
    const DataStats ds = data.stats();
    t.data_queue_depth = ds.queue_depth;
    t.data_images = ds.images;
    t.data_bytes_read = ds.bytes_read;
    trace.iterations.push_back(t);
    if (after_iteration) after_iteration(trace);

    if (progress && cfg_.print_every > 0 && ((it + 1) % cfg_.print_every == 0 || it + 1 == cfg_.iterations)) {
      const double step = t.end - t.start;
      const double rate = static_cast<double>(model_.samples_per_step() * world) / step;
      const double elapsed = t.end - run_start;
      const double eta = elapsed / static_cast<double>(it + 1) * static_cast<double>(cfg_.iterations - it - 1);
      char line[160];
      std::snprintf(line, sizeof line, "iter %5lld/%lld  loss %8.4f  %9.2f samples/s  lr %.4g  eta %s\n",
                    static_cast<long long>(it + 1), static_cast<long long>(cfg_.iterations), static_cast<double>(t.loss), rate,
                    static_cast<double>(cfg_.lr.at(it)), format_eta(eta).c_str());
      *progress << line << std::flush;
    }
  }
}

bool Trainer::gradients_finite() {
  // inf and nan propagate through a sum of squares; one pass over the buffer, no new kernel.
  return std::isfinite(be_.sum_squares({grads_->data(), grads_->size()}));
}

double window_throughput(const RankTrace& t, int64_t warmup, int64_t samples_per_iteration) {
  const auto n = static_cast<int64_t>(t.iterations.size());
  if (n <= warmup || n == 0) return 0.0;
  const double begin = warmup > 0 ? t.iterations[static_cast<size_t>(warmup - 1)].end : t.iterations.front().start;
  const double end = t.iterations.back().end;
  return end > begin ? static_cast<double>((n - warmup) * samples_per_iteration) / (end - begin) : 0.0;
}

}  // namespace dlperf
