#include "train/run.h"

#include <algorithm>
#include <cstdio>
#include <ostream>

#include "core/error.h"
#include "models/resnet.h"
#include "train/param_store.h"
#include "train/synthetic_data.h"
#include "train/trainer.h"

namespace dlperf {
namespace {

std::string with_commas(int64_t v) {
  std::string s = std::to_string(v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

}  // namespace

RunSummary run_training(const TrainOptions& o, std::ostream& out, RankTrace& trace) {
  auto be = make_backend(o.backend, {o.precision, o.threads, 0});
  ResNetConfig rc;
  rc.blocks = o.resnet_blocks;
  rc.width = o.resnet_width;
  rc.classes = o.num_classes;
  rc.batch = o.batch_size;
  rc.image_size = o.image_size;
  rc.label_smoothing = o.label_smoothing;
  auto model = make_resnet(*be, rc);
  ParamStore store(*be, model->layers());
  model->init_params(o.seed);
  SgdConfig sc{o.momentum, o.weight_decay};
  Sgd sgd(*be, store, sc);

  TrainConfig tc;
  tc.iterations = o.iterations;
  tc.warmup = o.warmup;
  tc.print_every = o.print_every;
  const int world = 1;
  tc.lr = {o.lr_schedule, o.lr * static_cast<float>(o.batch_size * world) / 256.0f,
           o.lr_warmup >= 0 ? o.lr_warmup : o.iterations / 10, o.iterations};
  SyntheticImages data(o.batch_size, o.image_size, o.num_classes, o.seed);

  out << "dlperf-train: " << o.model << " (ResNet v1.5), " << to_string(o.precision) << ", batch " << o.batch_size << " per device, "
      << o.image_size << "x" << o.image_size << ", " << o.num_classes << " classes\n"
      << "backend: " << to_string(o.backend) << ", " << be->description() << "\n"
      << "parameters: " << with_commas(store.parameter_count()) << "\n"
      << "iterations: " << o.iterations << " (" << o.warmup << " warm-up)\n"
      << std::flush;

  Trainer trainer(*model, *be, store, sgd, tc);
  trainer.run([&]() -> const HostBatch& { return data.next(); }, nullptr, trace, nullptr, &out);

  RunSummary s;
  s.samples_per_s = window_throughput(trace, o.warmup, o.batch_size);
  s.measured_iterations = static_cast<int64_t>(trace.iterations.size()) - o.warmup;
  s.parameter_count = store.parameter_count();
  s.peak_memory_bytes = be->peak_memory_bytes();
  trace.peak_memory_bytes = s.peak_memory_bytes;
  if (!trace.iterations.empty()) {
    s.first_loss = trace.iterations.front().loss;
    s.last_loss = trace.iterations.back().loss;
  }
  std::vector<double> steps;
  for (size_t i = static_cast<size_t>(o.warmup); i < trace.iterations.size(); ++i)
    steps.push_back(trace.iterations[i].end - trace.iterations[i].start);
  std::sort(steps.begin(), steps.end());
  const double median_ms = steps.empty() ? 0.0 : 1e3 * steps[steps.size() / 2];
  char line[256];
  std::snprintf(line, sizeof line,
                "summary: throughput %.2f samples/s over %lld iterations after %lld warm-up; median step %.1f ms; "
                "loss %.4f -> %.4f; peak memory %.0f MiB\n",
                s.samples_per_s, static_cast<long long>(s.measured_iterations), static_cast<long long>(o.warmup), median_ms,
                static_cast<double>(s.first_loss), static_cast<double>(s.last_loss),
                static_cast<double>(s.peak_memory_bytes) / (1024.0 * 1024.0));
  out << line << std::flush;
  return s;
}

}  // namespace dlperf
