#include "train/run.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "comm/core_pinning.h"
#if defined(DLPERF_WITH_CUDA)
#include "comm/nccl/gpu_locality.h"
#endif
#include "comm/make_communicator.h"
#include "comm/mpi_main.h"
#include "comm/watchdog.h"
#include "core/check.h"
#include "core/error.h"
#include "core/on_unwind.h"
#include "models/llama_config.h"
#include "trace/async_writer.h"
#include "trace/file_lock.h"
#include "train/cluster/agreement.h"
#include "train/cluster/cluster.h"
#include "train/feed/data_report.h"
#include "train/parallel/gradient_exchange.h"
#include "train/parallel/zero.h"
#include "train/measure/llm_measures.h"
#include "train/feed/loader_only.h"
#include "train/memory/max_batch.h"
#include "train/memory/memory_plan.h"
#include "train/memory/out_of_memory.h"
#include "train/param_store.h"
#include "train/recording.h"
#include "train/registry.h"
#include "train/cluster/rank_binding.h"
#include "train/cluster/thread_budget.h"
#include "train/setup.h"

namespace dlperf {
namespace {

std::string with_commas(int64_t v) {
  std::string s = std::to_string(v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

RunInfo make_run_info(const WorldInfo& w, const TrainOptions& o, int64_t parameters, const data::Dataset* dataset) {
  RunInfo info = describe_environment(w);
  info.model = o.model;
  info.precision = to_string(o.precision);
  info.backend = to_string(o.backend);
  info.variant = o.variant;
  info.batch_per_device = o.batch_size;
  info.grad_accum = o.grad_accum;
  info.zero_stage = o.zero;
  info.global_batch = o.batch_size * o.grad_accum * w.size;
  // What changes the work of an iteration (dlperf-reduce groups runs by all of it).
  const bool images = o.model != "bert_base" && !is_llama_model(o.model);
  info.image_size = images ? o.image_size : 0;
  info.num_classes = images ? o.num_classes : 0;
  info.seq_len = images ? 0 : o.seq_len;
  info.max_predictions = images || is_llama_model(o.model) ? 0 : o.max_predictions;
  info.optimizer = o.optimizer;
  info.parameter_count = parameters;
  for (const auto& [name, value] : o.settings) info.settings.push_back(name + "=" + value);
  info.repeat_index = o.repeat_index;
  info.iterations = o.iterations;
  info.warmup = o.warmup;
  info.threads_per_rank = o.threads;
  info.command_line = o.command_line;
  describe_data(o, w, dataset, info);
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
  // One line on stderr however many there are (a job's error file stays readable); the
  // first names where, --plan-only lists them all.
  for (const auto& k : kernels)
    if (k.reference) {
      std::cerr << "dlperf-train: WARNING: " << reference << " of " << kernels.size() << " kernels run reference implementations on "
                << (isa.empty() ? "this machine" : isa) << " (first: " << k.op << " " << k.pass << " " << k.shape << " " << k.impl
                << "; --plan-only lists them): this run measures a fallback, not the machine\n";
      break;
    }
}

std::vector<KernelRecord> kernel_records(const std::vector<PlannedKernel>& kernels) {
  std::vector<KernelRecord> records;
  records.reserve(kernels.size());
  for (const auto& k : kernels) records.push_back({k.op, k.pass, k.shape, k.impl});
  return records;
}

// "replicas: parameters bit-identical on all 4 ranks (checksum 0x...)", or which ranks differ
// from rank 0 (a wrong allreduce, or ranks that ran different code).
std::string replica_summary(const std::vector<uint64_t>& checksums, const std::vector<std::string>& hosts) {
  if (checksums.size() < 2) return "";
  char hex[32];
  std::snprintf(hex, sizeof hex, "0x%016llx", static_cast<unsigned long long>(checksums[0]));
  std::string differ;
  for (size_t r = 1; r < checksums.size(); ++r)
    if (checksums[r] != checksums[0]) differ += (differ.empty() ? "" : ", ") + std::to_string(r) + " (" + hosts.at(r) + ")";
  if (differ.empty()) return "replicas: parameters bit-identical on all " + std::to_string(checksums.size()) + " ranks (checksum " + hex + ")\n";
  return "replicas: parameters DIFFER from rank 0's (checksum " + std::string(hex) + ") on rank(s) " + differ + "\n";
}

}  // namespace

int exit_code(RunOutcome outcome) {
  switch (outcome) {
    case RunOutcome::complete: return 0;
    case RunOutcome::partial:
    case RunOutcome::not_started: return kExitStopped;
    case RunOutcome::diverged: return kExitDiverged;
    case RunOutcome::not_recorded: return kExitError;
  }
  return kExitError;
}

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

// Every collective of a training run, each inside its watchdog phase (watchdog.h; README
// "Faults" lists the phases and their bounds).
// `o` by value: --pin-threads resolves an automatic thread count to the rank's share of cores.
RunSummary train_watched(MpiSession& session, TrainOptions o, std::ostream& out, Watchdog& watch) {
  const WorldInfo& w = session.world();
  const MPI_Comm world = session.world_comm();
  const bool root = w.rank == 0;
  install_stop_handlers();
  {
    auto phase = watch.collective("agree");
    // before anything is built or exchanged; an automatic thread count is each rank's own
    Settings agreed = o.settings;
    if (o.threads_automatic)
      for (auto& [name, value] : agreed)
        if (name == "threads") value = "0 (automatic)";
    check_ranks_agree(world, agreed);
  }
  if (o.find_max_batch) {
    RunSummary s;
    auto phase = watch.collective("max-batch", Watchdog::kNoBound);  // each attempt's allreduce, after building alone
    s.max_batch = find_max_batch(session, o, out);
    return s;
  }
  // The dataset first: a missing or empty one is a usage error before anything is built.
  std::shared_ptr<const data::Dataset> dataset;
  if (uses_image_files(o)) {
    auto phase = watch.collective("dataset", Watchdog::kNoBound);  // rank 0 indexes the dataset meanwhile
    dataset = share_dataset(world, o.data, o.num_classes);
  }
  std::string pinning;
  if (o.pin_threads) {
    // Before the backend starts its thread pool, so every compute thread inherits the cores.
    std::vector<std::vector<int>> near;  // cores close to each local rank's GPU, when known
#if defined(DLPERF_WITH_CUDA)
    if (o.backend == BackendKind::cuda) near = gpu_locality_by_local_rank(w.local_size);
#endif
    note_start_cores();
    auto phase = watch.collective("pinning");
    // --threads 0 without OMP_NUM_THREADS: each rank's share of the cores, which the plan finds
    // (ranks sharing the node's CPUs each counted all of them), less one core per rank for an
    // image loader. From OMP_NUM_THREADS, every rank plans with its own count: they must agree,
    // or one rank refuses alone.
    const bool share = o.threads_automatic && !o.threads_from_omp;
    if (o.threads_automatic && !share) {
      int range[2] = {-o.threads, o.threads};
      DLPERF_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, range, 2, MPI_INT, MPI_MAX, world));
      if (-range[0] != range[1])
        throw_usage_error("--pin-threads with --threads 0 (automatic): OMP_NUM_THREADS gave the ranks " + std::to_string(-range[0]) +
                          " to " + std::to_string(range[1]) + " threads each; give --threads N");
    }
    const int spare = share && uses_image_files(o) ? std::max(o.loader_threads, 1) : 0;
    const PinPlan plan = pin_local_ranks(world, w, share ? 0 : o.threads, spare, near);
    if (share) {
      o.threads = static_cast<int>(plan.pus[static_cast<size_t>(w.local_rank)].size());
      for (auto& [name, value] : o.settings)  // the trace records the count the run used
        if (name == "threads") value = std::to_string(o.threads);
    }
    note_compute_pinning(plan);
    pinning = plan.how;
  }

  // The memory plan (issue 25), before anything is allocated: a run that cannot fit is refused
  // here with one line (exit 2), on every rank alike.
  // On cuda the GPU's memory, where this machine has the GPU (a login node planning a GPU run
  // reports the plan without a limit).
  // On cpu this node's memory, shared by the ranks on it.
  const double memory_limit =
      memory_limit_bytes(o, o.backend == BackendKind::cuda ? static_cast<double>(cuda_device_memory_bytes(w.local_rank)) : 0.0, w.local_size);
  if (o.plan_only) {
    const MemoryPlan plan = plan_memory(o, o.plan_ranks > 0 ? o.plan_ranks : w.size);
    if (root) out << format_memory_plan(plan, memory_limit) << std::flush;
    // A plan asked on a CPU node without --memory-limit-mb (a login node: "what does the 8B need?")
    // is reported, not refused; against a given limit or a GPU's memory it is refused as a run is.
    if (o.memory_limit_mb > 0 || o.backend != BackendKind::cpu) refuse_unless_fits(o, plan, memory_limit);
    else if (root && plan.total() > memory_limit)
      out << "plan only: this node's memory is not the limit of a plan (give --memory-limit-mb); a run here would be refused\n";
    if (o.plan_ranks > 0 && o.plan_ranks != w.size) return RunSummary{};  // planned for other ranks: nothing to build here
  } else {
    refuse_unless_fits(o, plan_memory(o, w.size), memory_limit);
  }
  // The binding each rank got (cores after pinning, its GPU, its NIC): in the trace, and a
  // warning when its GPU or NIC sits on another NUMA node than its cores (issue 27 item 1).
  std::vector<std::string> bindings;
  {
    std::string gpu;
    int visible = 0;
    if (o.backend == BackendKind::cuda)
      if (const auto ids = cuda_pci_bus_ids(); !ids.empty()) {
        gpu = ids[static_cast<size_t>(w.local_rank) % ids.size()];  // as the backend picks it
        visible = static_cast<int>(ids.size());
      }
    const RankBinding mine = read_rank_binding(current_cpus(), gpu);
    if (const std::string warn = binding_warning(mine, w.rank, w.this_host); !warn.empty())
      std::cerr << "dlperf-train: WARNING: " + warn + "\n" << std::flush;
    auto phase = watch.collective("binding");
    bindings = gather_strings(world, to_string(mine));
    // Two ranks on one GPU: NCCL ends the job at its set-up ("Duplicate GPU detected") after the
    // model is built; here it is one line before. Through host memory they run, each on part of it.
    if (o.backend == BackendKind::cuda && w.size > 1)
      if (const std::string shared = shared_gpu(world, w, gpu, visible); !shared.empty()) {
        if (o.comm == CommBackend::nccl) throw_usage_error(shared);
        if (root) std::cerr << "dlperf-train: WARNING: " << shared << " (--comm mpi runs them, each with part of the GPU)\n" << std::flush;
      }
    // A default that took far fewer threads than the node has (mpirun binds each of 1-2 ranks to
    // one core by default; a module's OMP_NUM_THREADS=1) is said, not left to be found in the figures.
    const unsigned machine = std::thread::hardware_concurrency();
    // (A pinned share is every core the rank may have: SMT siblings left out on purpose.)
    if (root && o.backend == BackendKind::cpu && o.threads_automatic && !(o.pin_threads && !o.threads_from_omp) && machine > 0 &&
        static_cast<unsigned>(o.threads * w.local_size) * 2 <= machine)
      out << "note: --threads 0 (automatic) gave " << o.threads << (o.threads == 1 ? " thread" : " threads") << " per rank ("
          << (o.threads_from_omp ? "OMP_NUM_THREADS" : "the CPUs the launcher bound rank 0 to") << ") x " << w.local_size
          << " rank(s) on a node of " << machine << " CPUs: give --threads N, or bind each rank to more CPUs (srun -c N, mpirun "
          << "--map-by slot:PE=N or --bind-to none)\n";
    // --pin-threads refuses a plan that does not fit; unpinned compute threads may share cores.
    if (o.backend == BackendKind::cpu && !o.pin_threads)
      if (const std::string warn = thread_oversubscription(world, w, o.threads, mine.cpus); !warn.empty())
        std::cerr << "dlperf-train: WARNING: " + warn + "\n" << std::flush;
  }

  // The plan above is an estimate: a build that still runs out of memory does not fit either,
  // and is refused as the plan is (exit 2, on every rank alike), not ended as a fault. After
  // registration (the exchange's buffers, a deferred optimizer) the run's record says so too.
  const auto fits = [](auto build, Recorder* registered) {
    try {
      return build();
    } catch (const std::exception& e) {
      if (!is_out_of_memory(std::current_exception())) throw;
      const std::string why = std::string("the run does not fit: building it ran out of memory (") + e.what() + "; --plan-only prints the plan)";
      if (registered && registered->writer) (void)write_final(*registered->writer, registered->record, RunStatus::failed, why);
      throw_usage_error(why);
    }
  };
  TrainingStack stack = fits([&] { return build_stack(o, w, true); }, nullptr);
  Backend& be = stack.be();
  if (root && shards_master_weights(o, w.size) && !stack.shard_master)
    std::cerr << "dlperf-train: WARNING: the " << to_string(o.backend)
              << " backend cannot give device memory back here (no virtual memory management): the f32 master weights stay whole "
                 "on every rank, above the plan's sharded figure\n"
              << std::flush;
  ParamStore& store = *stack.store;
  Model& model = *stack.model;
  const std::vector<PlannedKernel> kernels = be.planned_kernels();
  // The plan again with the model's own allocations in place of the activation floor (cpu).
  MemoryPlan built_plan = with_built_model(plan_memory(o, w.size), o, stack.model_bytes);
  // Batches copied per step go through the backend's input pipe (cuda: a device staging set,
  // allocated as the step starts); resident batches and the image loader's bypass it.
  if (!o.data_on_device && !dataset) built_plan.input = static_cast<double>(be.input_pipe_bytes(model.inputs()));
  // A CPU's plan before the build has only a floor for the activations, and the build touches no
  // page of them: a run past this node's memory is refused here, with the built figure, rather
  // than killed by the kernel's out-of-memory killer in its first step (a GPU's allocations
  // have already failed where they do not fit).
  if (!o.plan_only && o.backend == BackendKind::cpu) refuse_unless_fits(o, built_plan, memory_limit);
  if (o.plan_only) {
    if (root) {
      if (built_plan.model > 0) out << format_memory_plan(built_plan, memory_limit);
      out << "dlperf-train: " << model_title(o) << ", " << to_string(o.precision) << ", batch " << o.batch_size << " per device: "
          << with_commas(store.parameter_count()) << " parameters; backend " << be.description() << "\n";
      report_kernels(kernels, be.isa(), true, out);
    }
    RunSummary s;
    s.parameter_count = store.parameter_count();
    return s;
  }
  {
    // Before init_params: the layout probe overwrites the values. A GPU backend keeps its
    // parameters in the canonical layout; oneDNN blocks them as the rank's ISA prefers.
    const uint64_t layout = w.size > 1 && o.backend == BackendKind::cpu ? store.layout_signature() : 0;
    auto phase = watch.collective("params", Watchdog::kNoBound);  // ranks arrive after building (and autotuning) alone
    check_parameter_counts_agree(world, store.parameter_count());
    check_parameter_layouts_agree(world, layout, be.isa());
  }
  init_stack(stack, o, w, dataset);
  DataSource& data = *stack.data;
  // A rank on another CPU model (a mixed partition) or ISA (ONEDNN_MAX_CPU_ISA set on some ranks
  // only) runs other kernels at another speed: the trace says so per rank, not rank 0's alone.
  std::vector<std::string> cpus, isas, data_prints, threads, peak_tflops, peak_sources;
  {
    auto phase = watch.collective("identity");
    cpus = gather_strings(world, cpu_model());
    if (o.backend == BackendKind::cpu) {
      isas = gather_strings(world, be.isa());
      threads = gather_strings(world, std::to_string(o.threads));
      if (is_llama_model(o.model)) {  // each rank's own peak: its ISA, clock and cores
        const PeakFlops mine = cpu_rank_peak(o, be.isa());
        char t[32];
        std::snprintf(t, sizeof t, "%.17g", mine.tflops);
        peak_tflops = gather_strings(world, t);
        peak_sources = gather_strings(world, mine.source);
      }
    }
    // BERT shards and token datasets are opened by every rank: node-local copies may differ.
    data_prints = gather_strings(world, data.fingerprint());
  }

  RunSummary s;
  s.parameter_count = store.parameter_count();
  Recorder rec;
  rec.bindings = std::move(bindings);
  if (root) {
    // An automatic thread count is each rank's own (nodes of other sizes, an MPMD launch with
    // other OMP_NUM_THREADS): a run whose ranks differ records them all, so dlperf-reduce keeps it
    // apart from runs of one count instead of filing it under rank 0's.
    if (std::adjacent_find(threads.begin(), threads.end(), std::not_equal_to<>()) != threads.end()) {
      std::cerr << "dlperf-train: WARNING: the ranks run different numbers of compute threads: " << per_rank_value(threads)
                << " (the slowest sets the step time; give --threads N for one configuration)\n"
                << std::flush;
      for (auto& [name, value] : o.settings)
        if (name == "threads") value = per_rank_value(threads);
    }
    rec.record.info = make_run_info(w, o, store.parameter_count(), dataset.get());
    rec.record.info.data_fingerprint = per_rank_value(data_prints);
    if (std::adjacent_find(data_prints.begin(), data_prints.end(), std::not_equal_to<>()) != data_prints.end())
      std::cerr << "dlperf-train: WARNING: the ranks read different data (their copies of --data differ): fingerprints "
                << per_rank_value(data_prints) << "\n"
                << std::flush;
    rec.record.info.cpu_model = per_rank_value(cpus);
    if (o.backend == BackendKind::cpu) rec.record.info.cpu_isa = per_rank_value(isas);  // a GPU's sm_XX is in its kernel lines
    for (const auto& [what, values] : {std::pair{"CPU model", &cpus}, std::pair{"oneDNN ISA", &isas}})
      if (std::adjacent_find(values->begin(), values->end(), std::not_equal_to<>()) != values->end())
        std::cerr << "dlperf-train: WARNING: the ranks differ in " << what << ": " << per_rank_value(*values)
                  << " (the slowest sets the step time)\n"
                  << std::flush;
    rec.record.kernels = kernel_records(kernels);
    add_device_facts(rec.record.info, be.device_facts());
    rec.record.info.profile_ops = o.profile_ops;
    rec.record.info.cuda_graph = o.cuda_graph ? 1 : 0;
  }
  {
    auto phase = watch.collective("register", results_bound(o));  // rank 0 may wait for the results lock
    if (Registration reg = register_run(world, root, o, rec); reg.outcome != RunOutcome::complete) {
      s.outcome = reg.outcome;
      s.message = reg.message;
      return s;
    }
  }

  CommOptions copt;
  copt.timeout = std::chrono::seconds(o.timeout_s);
  std::unique_ptr<Communicator> control;
  std::unique_ptr<Communicator> device_comm;
  {
    auto phase = watch.collective("comm-setup", Watchdog::kNoBound);  // NCCL's set-up may take a while
    control = make_communicator(CommBackend::mpi, world, w, copt);  // host memory: stop flags
    if (o.backend == BackendKind::cuda && w.size > 1) device_comm = make_gradient_comm(o, w, world, copt, be);
  }
  Communicator* grad_comm = device_comm ? device_comm.get() : control.get();
  // Replicas start equal: rank 0's initial parameters everywhere (device memory goes through
  // NCCL or the staged communicator, never straight to MPI, which only a CUDA-aware MPI takes).
  if (w.size > 1) {
    auto phase = watch.collective("broadcast");
    grad_comm->broadcast(store.values().data(), store.size(), 0);
  }
  std::unique_ptr<GradientExchange> exchange;
  ZeroExchange* zero_exchange = nullptr;
  if (w.size > 1 && stack.shard) {  // --zero 1/2: reduce-scatter, sharded update, all-gather
    auto zero = fits([&] {  // its staging buffers
      return std::make_unique<ZeroExchange>(*grad_comm, store, *stack.cut, *stack.shard, *stack.shard_grads, be,
                                            o.clip_grad_norm > 0 || o.precision == Precision::fp16,  // the global norm, or fp16's finite check
                                            o.zero, o.grad_accum, stack.shard_master, o.zero_gather == "forward");
    }, &rec);
    zero_exchange = zero.get();
    if (!stack.optimizer)  // deferred by build_stack: the master's unkept values are given back now
      stack.optimizer = fits([&] { return make_optimizer(o, be, store, stack.optimizer_shard.get()); }, &rec);
    stack.optimizer = std::make_unique<GatherAfterStep>(std::move(stack.optimizer), *zero);
    exchange = std::move(zero);
  } else if (w.size > 1) {
    exchange = std::make_unique<BucketedAllreduce>(*grad_comm, store, bucket_bytes(o));
  }

  RankTrace mine;
  mine.host = w.this_host;
  {
    auto phase = watch.collective("clock");
    mine.clock_offset = measure_clock_offset(world);
  }
  if (root) {
    rec.record.info.comm_backend = w.size > 1 ? to_string(grad_comm->backend()) : "";
    if (device_comm && o.comm == CommBackend::mpi) rec.record.info.comm_backend = "mpi_staged";
    // The input shape: images for the CNNs; BERT's title already names its sequence length and
    // predictions per sequence.
    out << "dlperf-train: " << model_title(o) << ", " << to_string(o.precision) << ", batch " << o.batch_size << " per device";
    if (o.model != "bert_base" && !is_llama_model(o.model)) out << ", " << o.image_size << "x" << o.image_size << ", " << o.num_classes << " classes";
    out << "\n";
    out << "backend: " << to_string(o.backend) << ", " << be.description() << "\n"
        << "ranks: " << w.size << " on " << w.node_count << " node(s)";
    if (exchange) out << ", gradients in " << exchange->bucket_count() << " buckets of <= " << o.bucket_mb << " MiB over " << to_string(grad_comm->backend());
    if (stack.shard)
      out << zero_banner(*stack.shard, o.zero, zero_exchange && zero_exchange->shards_master(), o.zero_gather == "forward",
                         zero_exchange && zero_exchange->gathers_compute_precision() ? to_string(be.dtype()) : "");
    else if (o.zero > 0)  // accepted (a sweep's 1-device point), but nothing is sharded or gathered
      out << "\nzero: stage " << o.zero << " on one rank shards nothing: the optimizer state and gradients stay whole, "
          << "as with --zero 0";
    if (!pinning.empty()) out << "\npinned: " << pinning;
    out << "\ndata: " << data_banner(o, w, dataset.get(), model);
    out << "\nparameters: " << with_commas(store.parameter_count()) << "\n"
        << "iterations: " << o.iterations << " (" << o.warmup << " warm-up)\n";
    out << "global batch: " << o.batch_size * o.grad_accum * w.size << " (batch " << o.batch_size << " x grad-accum " << o.grad_accum
        << " x " << w.size << " rank" << (w.size > 1 ? "s" : "") << ")\n";
    report_kernels(kernels, be.isa(), false, out);
  }

  const TrainConfig tc = train_config(o, w.size, stack.profiler.get());
  Trainer trainer(model, stack.model_be(), *stack.optimizer, tc, &store.grads(), &store);
  if (root) {
    rec.record.info.loss_scaling = to_string(tc.loss_scale.mode);
    rec.record.info.memory_plan_bytes = static_cast<int64_t>(built_plan.total());
    if (stack.shard) {  // every rank computes the same layout: rank 0 knows every shard
      const auto [lo, hi] = std::minmax_element(stack.shard->rank_elems.begin(), stack.shard->rank_elems.end());
      rec.record.info.zero_shard_min = static_cast<int64_t>(*lo);
      rec.record.info.zero_shard_max = static_cast<int64_t>(*hi);
    }
  }
  // Stops and divergence are agreed on by every rank at an iteration boundary (Slurm signals
  // each rank on its own; losses differ per rank); a lone rank needs no agreement.
  int signalled_ranks = 0;  // at the last boundary: how many ranks had seen a stop signal
  const auto boundary = [&](const BoundaryFlags& local) {
    auto phase = watch.collective("step");  // each step ends here, after its gradients' exchange
    // A results file that can no longer be written (full disk) stops the run like a signal.
    const bool unrecordable = rec.writer && !rec.writer->failure().empty();
    const BoundaryFlags here{stop_requested().load() || unrecordable, local.diverged, stop_signal() ? 1 : 0};
    const BoundaryFlags all = w.size > 1 ? agree_at_boundary(*control, here) : here;
    signalled_ranks = all.signalled_ranks;
    return all;
  };
  // NCCL's log names its transport once the first collectives have connected (a flush and the
  // end of the run read it).
  const std::function<std::string()> nccl_transport = [c = device_comm.get()] { return c ? c->transport() : std::string(); };
  if (o.warmup == 0) be.begin_measured_window();
  const auto after_iteration = [&](const RankTrace& t) {
    // The mapping cost per measured step counts from here (the host's side of the boundary:
    // the driver calls it counts are host work).
    if (static_cast<int64_t>(t.iterations.size()) == o.warmup) be.begin_measured_window();
    // Same iteration count on every rank, so every rank joins the gather at the same point.
    if (static_cast<int64_t>(t.iterations.size()) % o.flush_every != 0) return;
    auto phase = watch.collective("flush");
    rec.collect(world, t, w);
    if (root) {
      rec.record.info.input_mode = to_string(trainer.input_mode());
      rec.record.info.nccl_transport = nccl_transport();
    }
    rec.flush();
  };
  // Unwinding from a fault after the steps (the restore's wait for memory a collective still
  // uses; within the steps the trainer does the same before its own buffers go): the device
  // communicator ends what is in flight here, before what is declared above is destroyed (the
  // exchange's buffers, the trainer's, the input's), as freeing device memory waits for the
  // device, and so for a collective a peer may never join; ~NcclCommunicator would abort it only
  // after them. Declared just before the steps, so it goes before everything they use.
  const OnUnwind abort_in_flight([c = device_comm.get()] {
    if (c) c->abort_in_flight();
  });
  const DataStats loader_start = data.stats();
  try {
    // Each step's waits are bounded by the communicators (--timeout); its boundary is a phase too.
    auto phase = watch.collective("step", Watchdog::kNoBound);
    trainer.run(data, exchange.get(), mine, boundary, root ? &out : nullptr,
                after_iteration);
  } catch (const DivergedError& e) {
    // Every rank threw at the same boundary: gather what was measured (the diverging
    // iterations included) and record the run as failed; no rank is left waiting.
    {
      auto phase = watch.collective("gather");
      rec.collect(world, mine, w);
    }
    if (e.here() && !root) std::cerr << "dlperf-train: rank " << w.rank << ": " << e.what() << "\n" << std::flush;
    s.outcome = RunOutcome::diverged;
    s.message = std::string(e.what()) + "; recorded as failed";
    if (rec.writer) {
      auto phase = watch.local("write", final_write_bound(o));
      rec.record.info.end_time_utc = utc_now_iso8601();
      if (const std::string failed = write_final(*rec.writer, rec.record, RunStatus::failed, e.what()); !failed.empty()) {
        s.outcome = RunOutcome::not_recorded;
        s.message = std::string(e.what()) + "; not recorded: " + failed;
      }
    }
    if (end_together(session, watch, s.outcome) == RunOutcome::not_recorded) s.outcome = RunOutcome::not_recorded;
    return s;
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
  const DataStats loader_loop = loop_stats(data.stats(), loader_start);
  mine.data_bad_samples = loader_loop.bad_samples;
  // Data parallelism keeps every replica's parameters bit-identical (same start, same averaged
  // gradients, same update): one checksum per rank makes a broken allreduce visible.
  if (zero_exchange) {  // sharded master or bf16/fp16 all-gathers: the whole f32 values again, for the checksum
    auto phase = watch.collective("restore");
    stack.optimizer->release_state();  // the steps are over: its state makes room for the whole master
    zero_exchange->restore_values();
  }
  mine.allocated_peak_bytes = be.allocated_peak_bytes();  // the restore's whole master included: the plan counts it
  const uint64_t checksum = store.checksum();
  std::vector<uint64_t> checksums(root ? static_cast<size_t>(w.size) : 0);
  std::string transports;
  {
    auto phase = watch.collective("gather");  // the end-of-run gathers
    rec.collect(world, mine, w);
    // NCCL's transport can differ per rank (P2P inside a node, IB between nodes): the union.
    transports = join_distinct(gather_strings(world, nccl_transport()));
    DLPERF_CHECK_MPI(MPI_Gather(&checksum, 1, MPI_UINT64_T, checksums.data(), 1, MPI_UINT64_T, 0, world));
  }
  if (root) {
    RunInfo& info = rec.record.info;
    info.input_mode = to_string(trainer.input_mode());
    info.nccl_transport = transports;
    if (stack.profiler) rec.record.ops = stack.profiler->result(0);
  }

  s.stopped_early = static_cast<int64_t>(mine.iterations.size()) < o.iterations;
  if (s.stopped_early) s.outcome = RunOutcome::partial;
  if (!root) {
    // While rank 0 writes the results; what it could not write is this rank's outcome too.
    if (end_together(session, watch, s.outcome) == RunOutcome::not_recorded) s.outcome = RunOutcome::not_recorded;
    return s;
  }
  for (size_t r = 0; r < checksums.size() && r < rec.record.ranks.size(); ++r) rec.record.ranks[r].param_checksum = checksums[r];
  const auto& ranks = rec.record.ranks;
  s.samples_per_s = job_throughput(ranks, o.warmup, o.batch_size * o.grad_accum);  // every micro-batch's samples
  s.measured_iterations = std::max<int64_t>(0, static_cast<int64_t>(mine.iterations.size()) - o.warmup);
  for (const auto& t : ranks) s.peak_memory_bytes = std::max(s.peak_memory_bytes, t.peak_memory_bytes);
  // The global batch's loss, the mean over ranks of each one's (equal batches), at the first and
  // the last iteration every rank recorded: rank 0's alone is a share of the batch, and a 2-rank
  // run printed another loss than a 1-rank run of the same global batch.
  size_t common = SIZE_MAX;
  for (const auto& t : ranks) common = std::min(common, t.iterations.size());
  if (!ranks.empty() && common > 0 && common != SIZE_MAX) {
    double first = 0, last = 0;
    for (const auto& t : ranks) {
      first += t.iterations.front().loss;
      last += t.iterations[common - 1].loss;
    }
    s.first_loss = static_cast<float>(first / static_cast<double>(ranks.size()));
    s.last_loss = static_cast<float>(last / static_cast<double>(ranks.size()));
  } else if (!mine.iterations.empty()) {
    s.first_loss = mine.iterations.front().loss;
    s.last_loss = mine.iterations.back().loss;
  }
  // Each measured iteration's period, from the previous one's end, as the window's throughput
  // counts it: the host's work between two steps (the next batch, the stop check, a flush) is
  // in it, and a step that waits for it shows. The first iteration of a run without warm-up
  // counts from its own start.
  std::vector<double> steps;
  const auto& its = mine.iterations;
  for (size_t i = static_cast<size_t>(std::min<int64_t>(o.warmup, static_cast<int64_t>(its.size()))); i < its.size(); ++i)
    steps.push_back(its[i].end - (i > 0 ? its[i - 1].end : its[i].start));
  std::sort(steps.begin(), steps.end());
  const double median_ms = steps.empty() ? 0.0 : 1e3 * steps[steps.size() / 2];
  // The backend's own count of what it allocated, where it keeps one (cpu: what
  // --memory-limit-mb checks; cuda: its own device allocations, the device's figure apart): its
  // peak over the run, as the trace records it, the sharded master's set-up and its restore for
  // the checksum after the last step included (the memory plan's whole-master moment).
  char allocated[64] = "";
  if (const int64_t a = mine.allocated_peak_bytes; a > 0)
    std::snprintf(allocated, sizeof allocated, "allocated %.1f MiB, ", static_cast<double>(a) / (1024.0 * 1024.0));
  char line[320];
  std::snprintf(line, sizeof line,
                "summary: throughput %.2f samples/s over %lld iterations after %lld warm-up (%d rank%s); median step %.1f ms; "
                "loss %.4f -> %.4f%s; peak memory %.0f MiB (%splan %s%.1f MiB)\n",
                s.samples_per_s, static_cast<long long>(s.measured_iterations), static_cast<long long>(o.warmup), w.size,
                w.size > 1 ? "s" : "", median_ms, static_cast<double>(s.first_loss), static_cast<double>(s.last_loss),
                w.size > 1 ? " (mean over ranks)" : "",
                static_cast<double>(s.peak_memory_bytes) / (1024.0 * 1024.0), allocated, built_plan.model > 0 ? "" : ">= ",
                built_plan.total() / (1024.0 * 1024.0));
  out << line;
  if (is_llama_model(o.model)) {
    std::vector<double> peaks;
    for (const std::string& t : peak_tflops) peaks.push_back(std::strtod(t.c_str(), nullptr));
    const PeakFlops peak = o.backend == BackendKind::cpu && !peaks.empty()
                               ? mean_peak(peaks, peak_sources)
                               : peak_flops(o.peak_tflops, o.backend, o.precision, rec.record.info.gpu_model, be.isa(), o.threads);
    const LlmMeasures llm = llm_measures(o, w.size, s.samples_per_s, peak);
    out << llm_summary(llm);
    // Above 100% is no utilisation: the peak is below what the run computed (dlperf-reduce says so too).
    if (llm.peak.tflops > 0 && llm.mfu > 1)
      std::cerr << "dlperf-train: WARNING: MFU " << 100.0 * llm.mfu << "% is above 100%: the peak per device (" << llm.peak.tflops
                << " TFLOP/s, " << llm.peak.source << ") is below what the run computed; check --peak-tflops\n" << std::flush;
    RunInfo& info = rec.record.info;
    info.model_flops_per_token = llm.flops_per_token;
    info.peak_tflops_per_device = llm.peak.tflops;
    info.peak_source = llm.peak.source;
    info.tokens_per_s = llm.tokens_per_s;
    info.mfu = llm.mfu;
  }
  int64_t device_peak = 0;
  for (const auto& t : ranks) device_peak = std::max(device_peak, t.device_memory_peak_bytes);
  if (device_peak > 0) {
    std::snprintf(line, sizeof line, "device memory: peak %.0f MiB in use as the GPU reports it (dlperf's own allocations: %.0f MiB)\n",
                  static_cast<double>(device_peak) / (1024.0 * 1024.0), static_cast<double>(s.peak_memory_bytes) / (1024.0 * 1024.0));
    out << line;
  }
  out << be.memory_mapping_summary(static_cast<int64_t>(mine.iterations.size()) - o.warmup);
  out << replica_summary(checksums, w.hosts);
  if (dataset)
    out << loader_summary(ranks, o.warmup, loader_loop, loader_threads(o, w));
  if (rec.writer && !mine.iterations.empty()) {
    const double loop = mine.iterations.back().end - mine.iterations.front().start;
    std::snprintf(line, sizeof line, "tracing: %.2f ms on the training thread, %.3f%% of the loop's %.1f s\n", 1e3 * tracing_in_loop,
                  loop > 0 ? 100.0 * tracing_in_loop / loop : 0.0, loop);
    out << line;
  }
  rec.record.info.end_time_utc = utc_now_iso8601();
  bool unrecorded = false;
  {
    auto phase = watch.local("write", final_write_bound(o));
    const auto not_recorded = [&](const std::string& failed) {
      // Issue 27 item 11: one line (main prints s.message), no promise of a partial record.
      s.outcome = RunOutcome::not_recorded;
      s.message = failed + "; the run " + (s.stopped_early ? "stopped after " : "ran ") + std::to_string(mine.iterations.size()) +
                  " iterations (the results file keeps its last good flush, as an unfinished run)";
      unrecorded = true;
    };
    if (const std::string failed = rec.writer ? rec.writer->failure() : ""; !failed.empty()) {
      not_recorded(failed);
    } else if (s.stopped_early) {
      // Rank 0's own signal, or how many others saw one (a signal to one rank stops them all).
      const std::string of_ranks = std::to_string(signalled_ranks) + " of " + std::to_string(w.size) + " ranks";
      const std::string by = stop_signal() ? "stopped by signal " + std::to_string(stop_signal()) +
                                                 (signalled_ranks > 1 && signalled_ranks < w.size ? " (seen by " + of_ranks + ")" : "")
                             : signalled_ranks > 0 ? "stopped by a signal to " + of_ranks + ", not rank 0,"
                                                   : "stopped early";
      const std::string why = by + " after " + std::to_string(mine.iterations.size()) + " iterations";
      if (const std::string unwritten = rec.writer ? write_final(*rec.writer, rec.record, RunStatus::partial, why) : ""; !unwritten.empty())
        not_recorded(unwritten);
      else
        out << "run stopped early: " << why << (rec.writer ? "; recorded as partial\n" : "\n");  // once it is
    } else if (rec.writer) {
      if (const std::string unwritten = write_final(*rec.writer, rec.record, RunStatus::complete, ""); !unwritten.empty())
        not_recorded(unwritten);
    }
  }
  end_together(session, watch, s.outcome);
  if (unrecorded) {
    out << std::flush;
    return s;
  }
  if (rec.writer) out << "trace: " << rec.writer->writer().path() << ":/runs/" << rec.writer->writer().run_name() << "\n";
  out << std::flush;
  return s;
}

}  // namespace

RunSummary run_training(MpiSession& session, const TrainOptions& o, std::ostream& out) {
  const std::chrono::seconds timeout(o.timeout_s);
  Watchdog watch(session.world_comm(), session.world(), timeout, CommOptions{}.heartbeat_period, "dlperf-train");
  try {
    RunSummary s;
    if (o.loader_only) {
      auto phase = watch.collective("loader", Watchdog::kNoBound);  // its one barrier follows the timed reading
      s = run_loader_only(session, o, out);
    } else {
      s = train_watched(session, o, out, watch);
    }
    session.bound_exit(timeout, "dlperf-train");  // the communicators' goodbyes and MPI_Finalize
    return s;
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::usage) {  // every rank stops alike, then finalizes (or says so alone: bound_exit)
      session.bound_exit(timeout, "dlperf-train", e.what());
      throw;
    }
    // One line names the phase; the communicators' messages name the peer at fault.
    const WorldInfo& w = session.world();
    throw Error(e.kind(), "rank " + std::to_string(w.rank) + " (" + w.this_host + "): phase " + watch.phase_of_failure() + ": " + e.what());
  }
}

}  // namespace dlperf
