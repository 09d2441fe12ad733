#include "train/run.h"

#include <algorithm>
#include <cstdio>
#include <ostream>

#include "comm/core_pinning.h"
#include "comm/make_communicator.h"
#include "core/error.h"
#include "trace/async_writer.h"
#include "train/cluster.h"
#include "train/gradient_exchange.h"
#include "train/max_batch.h"
#include "train/param_store.h"
#include "train/registry.h"
#include "train/setup.h"

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
  return info;
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

namespace {

// The gradient communicator for a run of more than one rank (issue 13, items 7 and 8):
//   cpu              the control communicator itself (host memory, MPI)
//   cuda, nccl       NCCL on its own stream, ordered after the compute stream; refused when
//                    ranks of a node outnumber its GPUs (NCCL cannot put two ranks on one GPU)
//   cuda, mpi        MPI staged through pinned host memory, so ranks may share a GPU
std::unique_ptr<Communicator> make_gradient_comm(const TrainOptions& o, const WorldInfo& w, MPI_Comm world, const CommOptions& copt,
                                                 Backend& be) {
  auto* stream = static_cast<CUstream_st*>(be.stream_handle());
  if (o.comm == CommBackend::nccl) {
    const int devices = cuda_device_count();
    if (w.local_size > devices)
      throw_usage_error(std::to_string(w.local_size) + " ranks on " + w.this_host + " share " + std::to_string(devices) +
                        " GPU(s), which NCCL cannot; give each rank its own GPU or use --comm mpi");
    return make_communicator(CommBackend::nccl, world, w, copt, stream);
  }
  return make_staged_communicator(world, w, copt, stream);
}

}  // namespace

RunSummary run_training(MpiSession& session, const TrainOptions& o, std::ostream& out) {
  const WorldInfo& w = session.world();
  const MPI_Comm world = session.world_comm();
  const bool root = w.rank == 0;
  install_stop_handlers();
  if (o.find_max_batch) {
    RunSummary s;
    s.max_batch = find_max_batch(session, o, out);
    return s;
  }
  if (o.pin_threads && o.backend == BackendKind::cpu)
    pin_to_cores(disjoint_core_range(allowed_cores(), w.local_rank, w.local_size, o.threads));

  CommOptions copt;
  copt.timeout = std::chrono::seconds(o.timeout_s);
  auto control = make_communicator(CommBackend::mpi, world, w, copt);  // host memory: stop flags
  TrainingStack stack = build_stack(o, w);
  Backend& be = stack.be();
  ParamStore& store = *stack.store;

  std::unique_ptr<Communicator> device_comm;
  Communicator* grad_comm = control.get();
  if (o.backend == BackendKind::cuda && w.size > 1) {
    device_comm = make_gradient_comm(o, w, world, copt, be);
    grad_comm = device_comm.get();
  }
  // Replicas start equal: rank 0's initial parameters everywhere (device memory goes through
  // NCCL or the staged communicator, never straight to MPI, which only a CUDA-aware MPI takes).
  if (w.size > 1) grad_comm->broadcast(store.values().data(), store.size(), 0);
  std::unique_ptr<BucketedAllreduce> exchange;
  if (w.size > 1) exchange = std::make_unique<BucketedAllreduce>(*grad_comm, store, static_cast<size_t>(o.bucket_mb * 1024 * 1024));

  RankTrace mine;
  mine.host = w.this_host;
  mine.clock_offset = measure_clock_offset(world);
  Recorder rec;
  if (root) {
    rec.record.info = make_run_info(w, o);
    add_device_facts(rec.record.info, be.device_facts());
    rec.record.info.comm_backend = w.size > 1 ? to_string(grad_comm->backend()) : "";
    if (device_comm && o.comm == CommBackend::mpi) rec.record.info.comm_backend = "mpi_staged";
    if (!o.output.empty()) rec.writer = std::make_unique<AsyncTraceWriter>(o.output, rec.record.info);
    // The input shape: images for the CNNs; BERT's title already names its sequence length and
    // predictions per sequence.
    out << "dlperf-train: " << model_title(o) << ", " << to_string(o.precision) << ", batch " << o.batch_size << " per device";
    if (o.model != "bert_base") out << ", " << o.image_size << "x" << o.image_size << ", " << o.num_classes << " classes";
    out << "\n";
    out << "backend: " << to_string(o.backend) << ", " << be.description() << "\n"
        << "ranks: " << w.size << " on " << w.node_count << " node(s)";
    if (exchange) out << ", gradients in " << exchange->bucket_count() << " buckets of <= " << o.bucket_mb << " MiB over " << to_string(grad_comm->backend());
    out << "\nparameters: " << with_commas(store.parameter_count()) << "\n"
        << "iterations: " << o.iterations << " (" << o.warmup << " warm-up)\n"
        << std::flush;
  }

  const TrainConfig tc = train_config(o, w.size, stack.profiler.get());
  Trainer trainer(*stack.model, be, *stack.optimizer, tc, &store.grads());
  if (root) {
    RunInfo& info = rec.record.info;
    info.loss_scaling = to_string(tc.loss_scale.mode);
    info.cuda_graph = o.cuda_graph ? 1 : 0;
    info.profile_ops = o.profile_ops;
  }
  // Stops are agreed on by every rank at an iteration boundary (Slurm signals each rank on
  // its own); a lone rank needs no agreement.
  const auto should_stop = [&]() { return w.size > 1 ? any_rank_stopping(*control) : stop_requested().load(); };
  // NCCL's log names its transport once the first collectives have connected (a flush and the
  // end of the run read it).
  const std::function<std::string()> nccl_transport = [c = device_comm.get()] { return c ? c->transport() : std::string(); };
  const auto after_iteration = [&](const RankTrace& t) {
    // Same iteration count on every rank, so every rank joins the gather at the same point.
    if (static_cast<int64_t>(t.iterations.size()) % o.flush_every != 0) return;
    rec.collect(world, t, w.hosts);
    if (root) {
      rec.record.info.input_mode = to_string(trainer.input_mode());
      rec.record.info.nccl_transport = nccl_transport();
    }
    rec.flush();
  };
  try {
    trainer.run([&]() -> const HostBatch& { return stack.data->next(); }, exchange.get(), mine, should_stop, root ? &out : nullptr,
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
  mine.peak_memory_bytes = be.peak_memory_bytes();
  mine.device_memory_peak_bytes = trainer.device_memory_peak_bytes();
  rec.collect(world, mine, w.hosts);
  // NCCL's transport can differ per rank (P2P inside a node, IB between nodes): the union.
  const std::string transports = join_distinct(gather_strings(world, nccl_transport()));
  if (root) {
    RunInfo& info = rec.record.info;
    info.input_mode = to_string(trainer.input_mode());
    info.nccl_transport = transports;
    if (stack.profiler) rec.record.ops = stack.profiler->result(0);
  }

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
  int64_t device_peak = 0;
  for (const auto& t : ranks) device_peak = std::max(device_peak, t.device_memory_peak_bytes);
  if (device_peak > 0) {
    std::snprintf(line, sizeof line, "device memory: peak %.0f MiB in use as the GPU reports it (dlperf's own allocations: %.0f MiB)\n",
                  static_cast<double>(device_peak) / (1024.0 * 1024.0), static_cast<double>(s.peak_memory_bytes) / (1024.0 * 1024.0));
    out << line;
  }
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
