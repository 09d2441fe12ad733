#include "train/run.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <ostream>

#include "comm/core_pinning.h"
#include "comm/make_communicator.h"
#include "core/error.h"
#include "trace/async_writer.h"
#include "train/cluster.h"
#include "train/gradient_exchange.h"
#include "train/param_store.h"
#include "train/registry.h"

namespace dlperf {
namespace {

std::string with_commas(int64_t v) {
  std::string s = std::to_string(v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

RunInfo make_run_info(const WorldInfo& w, const TrainOptions& o) {
  RunInfo info = describe_environment(w);
  info.model = o.model;
  info.precision = to_string(o.precision);
  info.backend = to_string(o.backend);
  info.variant = o.variant;
  info.batch_per_device = o.batch_size;
  info.image_size = o.image_size;
  info.repeat_index = o.repeat_index;
  info.iterations = o.iterations;
  info.warmup = o.warmup;
  info.threads_per_rank = o.threads;
  info.command_line = o.command_line;
  info.conv_autotune = o.conv_autotune ? 1 : 0;
  return info;
}

// One line on what the library chose for every planned kernel, and a warning naming each
// reference implementation: a run with one in its timed loop measures a library's fallback
// (oneDNN's ref:*, a convolution cuDNN runs without tensor cores under tf32/bf16/fp16), not
// the machine. isa: the CPU ISA or the GPU's sm_XX. With --plan-only, the whole list.
void report_kernels(const std::vector<PlannedKernel>& kernels, const std::string& isa, bool list, std::ostream& out) {
  if (kernels.empty()) return;
  size_t reference = 0;
  for (const auto& k : kernels) reference += k.reference ? 1 : 0;
  out << "kernels: " << kernels.size() << " planned" << (isa.empty() ? "" : " on " + isa) << ", " << reference << " reference\n";
  if (list)
    for (const auto& k : kernels)
      out << "  " << k.op << "  " << k.pass << "  " << k.shape << "  " << k.impl << (k.reference ? "  <- REFERENCE" : "") << "\n";
  out << std::flush;
  for (const auto& k : kernels)
    if (k.reference)
      std::cerr << "dlperf-train: WARNING: " << k.op << " " << k.pass << " " << k.shape << " runs the reference implementation "
                << k.impl << " on " << (isa.empty() ? "this machine" : isa) << ": this run measures a fallback, not the machine\n";
}

std::vector<KernelRecord> kernel_records(const std::vector<PlannedKernel>& kernels) {
  std::vector<KernelRecord> records;
  records.reserve(kernels.size());
  for (const auto& k : kernels) records.push_back({k.op, k.pass, k.shape, k.impl});
  return records;
}

// Rank 0's record of the run, refreshed at each flush, so a failure can still write it.
// The time spent on the training thread for tracing (gathers, handing records to the
// writer thread) is measured, to report what tracing costs.
struct Recorder {
  std::unique_ptr<AsyncTraceWriter> writer;
  RunRecord record;
  double seconds = 0;

  void collect(MPI_Comm comm, const RankTrace& mine, const std::vector<std::string>& hosts) {
    const double t0 = steady_seconds();
    auto ranks = gather_traces(comm, mine);
    if (!ranks.empty()) {  // rank 0
      for (size_t r = 0; r < ranks.size(); ++r) ranks[r].host = hosts.at(r);
      record.ranks = std::move(ranks);
    }
    seconds += steady_seconds() - t0;
  }
  void flush() {
    const double t0 = steady_seconds();
    if (writer) writer->flush(record);
    seconds += steady_seconds() - t0;
  }
};

}  // namespace

double job_throughput(const std::vector<RankTrace>& ranks, int64_t warmup, int64_t batch_per_rank) {
  double longest = 0;
  int64_t samples = 0;
  for (const auto& t : ranks) {
    const auto n = static_cast<int64_t>(t.iterations.size());
    if (n <= warmup) return 0.0;  // a rank without a window: no throughput for the job
    const double begin = warmup > 0 ? t.iterations[static_cast<size_t>(warmup - 1)].end : t.iterations.front().start;
    longest = std::max(longest, t.iterations.back().end - begin);
    samples += (n - warmup) * batch_per_rank;
  }
  return longest > 0 ? static_cast<double>(samples) / longest : 0.0;
}

RunSummary run_training(MpiSession& session, const TrainOptions& o, std::ostream& out) {
  const WorldInfo& w = session.world();
  const MPI_Comm world = session.world_comm();
  const bool root = w.rank == 0;
  install_stop_handlers();
  if (o.pin_threads && o.backend == BackendKind::cpu)
    pin_to_cores(disjoint_core_range(allowed_cores(), w.local_rank, w.local_size, o.threads));

  auto be = make_backend(o.backend, {o.precision, o.threads, w.local_rank, o.conv_autotune});
  auto model = make_model(o, *be);
  ParamStore store(*be, model->layers());
  auto optimizer = make_optimizer(o, *be, store);
  const std::vector<PlannedKernel> kernels = be->planned_kernels();
  if (o.plan_only) {
    if (root) {
      out << "dlperf-train: " << model_title(o) << ", " << to_string(o.precision) << ", batch " << o.batch_size << " per device: "
          << with_commas(store.parameter_count()) << " parameters; backend " << be->description() << "\n";
      report_kernels(kernels, be->isa(), true, out);
    }
    RunSummary s;
    s.parameter_count = store.parameter_count();
    return s;
  }
  model->init_params(o.seed);
  auto data = make_data(o, w.rank);

  CommOptions copt;
  copt.timeout = std::chrono::seconds(o.timeout_s);
  auto control = make_communicator(CommBackend::mpi, world, w, copt);  // host memory: stop flags
  std::unique_ptr<Communicator> device_comm;
  Communicator* grad_comm = control.get();
  if (o.backend == BackendKind::cuda && w.size > 1) {
    device_comm = make_communicator(CommBackend::nccl, world, w, copt, static_cast<CUstream_st*>(be->stream_handle()));
    grad_comm = device_comm.get();
  }
  // Replicas start equal: rank 0's initial parameters everywhere.
  grad_comm->broadcast(store.values().data(), store.size(), 0);
  std::unique_ptr<BucketedAllreduce> exchange;
  if (w.size > 1) exchange = std::make_unique<BucketedAllreduce>(*grad_comm, store, static_cast<size_t>(o.bucket_mb * 1024 * 1024));

  RankTrace mine;
  mine.host = w.this_host;
  mine.clock_offset = measure_clock_offset(world);
  Recorder rec;
  if (root) {
    rec.record.info = make_run_info(w, o);
    if (o.backend == BackendKind::cpu) rec.record.info.cpu_isa = be->isa();  // a GPU's sm_XX is in its kernel lines
    rec.record.kernels = kernel_records(kernels);
    if (!o.output.empty()) rec.writer = std::make_unique<AsyncTraceWriter>(o.output, rec.record.info);
    // The input shape: images for the CNNs; BERT's title already names its sequence length and
    // predictions per sequence.
    out << "dlperf-train: " << model_title(o) << ", " << to_string(o.precision) << ", batch " << o.batch_size << " per device";
    if (o.model != "bert_base") out << ", " << o.image_size << "x" << o.image_size << ", " << o.num_classes << " classes";
    out << "\n";
    out << "backend: " << to_string(o.backend) << ", " << be->description() << "\n"
        << "ranks: " << w.size << " on " << w.node_count << " node(s)";
    if (exchange) out << ", gradients in " << exchange->bucket_count() << " buckets of <= " << o.bucket_mb << " MiB over " << to_string(grad_comm->backend());
    out << "\nparameters: " << with_commas(store.parameter_count()) << "\n"
        << "iterations: " << o.iterations << " (" << o.warmup << " warm-up)\n";
    report_kernels(kernels, be->isa(), false, out);
  }

  TrainConfig tc;
  tc.iterations = o.iterations;
  tc.warmup = o.warmup;
  tc.print_every = o.print_every;
  tc.lr = make_lr_schedule(o, w.size);
  if (o.precision == Precision::fp16) tc.loss_scale = {LossScaling::dynamic, 65536.0f, 2000};
  Trainer trainer(*model, *be, *optimizer, tc, &store.grads());
  // Stops are agreed on by every rank at an iteration boundary (Slurm signals each rank on
  // its own); a lone rank needs no agreement.
  const auto should_stop = [&]() { return w.size > 1 ? any_rank_stopping(*control) : stop_requested().load(); };
  const auto after_iteration = [&](const RankTrace& t) {
    // Same iteration count on every rank, so every rank joins the gather at the same point.
    if (static_cast<int64_t>(t.iterations.size()) % o.flush_every != 0) return;
    rec.collect(world, t, w.hosts);
    rec.flush();
  };
  try {
    trainer.run([&]() -> const HostBatch& { return data->next(); }, exchange.get(), mine, should_stop, root ? &out : nullptr,
                after_iteration);
  } catch (const Error& e) {
    // Keep what the last flush measured, marked failed, before the job is aborted.
    if (rec.writer) {
      rec.record.info.end_time_utc = utc_now_iso8601();
      rec.writer->finish(rec.record, RunStatus::failed, e.what());
    }
    throw;
  }
  const double tracing_in_loop = rec.seconds;  // gathers and hand-offs inside the timed loop
  mine.peak_memory_bytes = be->peak_memory_bytes();
  rec.collect(world, mine, w.hosts);

  RunSummary s;
  s.parameter_count = store.parameter_count();
  s.stopped_early = static_cast<int64_t>(mine.iterations.size()) < o.iterations;
  if (!root) return s;
  const auto& ranks = rec.record.ranks;
  s.samples_per_s = job_throughput(ranks, o.warmup, o.batch_size);
  s.measured_iterations = std::max<int64_t>(0, static_cast<int64_t>(mine.iterations.size()) - o.warmup);
  for (const auto& t : ranks) s.peak_memory_bytes = std::max(s.peak_memory_bytes, t.peak_memory_bytes);
  if (!mine.iterations.empty()) {
    s.first_loss = mine.iterations.front().loss;
    s.last_loss = mine.iterations.back().loss;
  }
  std::vector<double> steps;
  for (size_t i = static_cast<size_t>(std::min<int64_t>(o.warmup, static_cast<int64_t>(mine.iterations.size()))); i < mine.iterations.size(); ++i)
    steps.push_back(mine.iterations[i].end - mine.iterations[i].start);
  std::sort(steps.begin(), steps.end());
  const double median_ms = steps.empty() ? 0.0 : 1e3 * steps[steps.size() / 2];
  char line[320];
  std::snprintf(line, sizeof line,
                "summary: throughput %.2f samples/s over %lld iterations after %lld warm-up (%d rank%s); median step %.1f ms; "
                "loss %.4f -> %.4f; peak memory %.0f MiB\n",
                s.samples_per_s, static_cast<long long>(s.measured_iterations), static_cast<long long>(o.warmup), w.size,
                w.size > 1 ? "s" : "", median_ms, static_cast<double>(s.first_loss), static_cast<double>(s.last_loss),
                static_cast<double>(s.peak_memory_bytes) / (1024.0 * 1024.0));
  out << line;
  if (rec.writer && !mine.iterations.empty()) {
    const double loop = mine.iterations.back().end - mine.iterations.front().start;
    std::snprintf(line, sizeof line, "tracing: %.2f ms on the training thread, %.3f%% of the loop's %.1f s\n", 1e3 * tracing_in_loop,
                  loop > 0 ? 100.0 * tracing_in_loop / loop : 0.0, loop);
    out << line;
  }
  rec.record.info.end_time_utc = utc_now_iso8601();
  if (s.stopped_early) {
    const std::string why = stop_signal() ? "stopped by signal " + std::to_string(stop_signal()) + " after " +
                                                std::to_string(mine.iterations.size()) + " iterations"
                                          : "stopped early";
    out << "run stopped early: " << why << "; recorded as partial\n";
    if (rec.writer) rec.writer->finish(rec.record, RunStatus::partial, why);
  } else if (rec.writer) {
    rec.writer->finish(rec.record, RunStatus::complete);
  }
  if (rec.writer) out << "trace: " << rec.writer->writer().path() << ":/runs/" << rec.writer->writer().run_name() << "\n";
  out << std::flush;
  return s;
}

}  // namespace dlperf
