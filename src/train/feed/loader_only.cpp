#include "train/feed/loader_only.h"

#include <algorithm>
#include <cstdio>
#include <ostream>

#include "core/check.h"
#include "train/cluster/cluster.h"
#include "train/feed/data_report.h"
#include "train/registry.h"
#include "train/trainer.h"

namespace dlperf {

RunSummary run_loader_only(MpiSession& session, const TrainOptions& o, std::ostream& out) {
  const WorldInfo& w = session.world();
  const MPI_Comm world = session.world_comm();
  install_stop_handlers();
  auto dataset = share_dataset(world, o.data, o.num_classes);
  // The backend only provides the batch memory (pinned on CUDA) and, for --decoder gpu, the device.
  auto be = make_backend(o.backend, {o.precision, 1, w.local_rank});
  const InputSpec input = cnn_image_input(o);
  auto data = make_image_data(o, w, dataset, input, *be);
  const int threads = loader_threads(o, w);
  if (w.rank == 0) {
    char line[512];
    std::snprintf(line, sizeof line,
                  "dlperf-train --loader-only: %s (%s, %zu images); %s decoder, %d loader thread%s per rank, %d rank%s; batches of %s; "
                  "%lld batches after %lld warm-up\n",
                  dataset->root().c_str(), to_string(dataset->layout()), dataset->size(), to_string(o.decoder), threads,
                  threads == 1 ? "" : "s", w.size, w.size == 1 ? "" : "s", data->format().describe().c_str(),
                  static_cast<long long>(o.iterations - o.warmup), static_cast<long long>(o.warmup));
    out << line << std::flush;
  }
  DLPERF_CHECK_MPI(MPI_Barrier(world));

  RankTrace mine;
  const DataStats start = data->stats();
  for (int64_t it = 0; it < o.iterations; ++it) {
    if (w.size == 1 && stop_requested().load()) break;
    IterationTiming t;
    t.start = steady_seconds();
    data->next();
    t.end = steady_seconds();
    data->release();
    t.phase_seconds[static_cast<int>(Phase::data)] = static_cast<float>(t.end - t.start);
    const DataStats s = data->stats();
    t.data_queue_depth = s.queue_depth;
    t.data_images = s.images;
    t.data_bytes_read = s.bytes_read;
    mine.iterations.push_back(t);
  }
  const DataStats local = data->stats();
  mine.data_bad_samples = local.bad_samples;
  const auto ranks = gather_traces(world, mine);

  RunSummary s;
  s.measured_iterations = std::max<int64_t>(0, static_cast<int64_t>(mine.iterations.size()) - o.warmup);
  s.stopped_early = static_cast<int64_t>(mine.iterations.size()) < o.iterations;
  if (w.rank != 0) return s;
  // Per rank: batches after the warm-up over the time they took; the job: the sum.
  double slowest = 0;
  for (const auto& r : ranks) {
    const auto n = static_cast<int64_t>(r.iterations.size());
    if (n <= o.warmup) continue;
    const double begin = o.warmup > 0 ? r.iterations[static_cast<size_t>(o.warmup - 1)].end : r.iterations.front().start;
    const double rate = static_cast<double>((n - o.warmup) * o.batch_size) / (r.iterations.back().end - begin);
    s.samples_per_s += rate;
    slowest = slowest == 0 ? rate : std::min(slowest, rate);
  }
  char line[512];
  std::snprintf(line, sizeof line,
                "summary: loader %.1f images/s (%d rank%s x %d thread%s; slowest rank %.1f); rank 0: %.1f images/s per busy thread\n",
                s.samples_per_s, w.size, w.size == 1 ? "" : "s", threads, threads == 1 ? "" : "s", slowest,
                local.busy_seconds > 0 ? static_cast<double>(local.images) / local.busy_seconds : 0.0);
  out << line << loader_summary(ranks, o.warmup, loop_stats(local, start), threads) << std::flush;
  return s;
}

}  // namespace dlperf
