// The in-memory record of one training run: what was run, where, with what, and per
// iteration x rank how long each phase took. dlperf-train fills it; trace/ writes it to
// HDF5 (one group per run, schema in docs/trace-schema.md); analysis/ reads it back.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dlperf {

enum class RunStatus : uint8_t {
  running,   // being written; a reader treats it like partial
  complete,  // every iteration measured
  partial,   // stopped early (SIGTERM, time limit): what was measured is kept
  failed,    // an error ended it
};
const char* to_string(RunStatus s);
RunStatus run_status_from_string(const std::string& s);  // throws Error(usage) on unknown

// Phases of one training step, in the order they run.
enum class Phase : uint8_t { data, forward, backward, comm_exposed, optimizer, count };
inline constexpr int kPhaseCount = static_cast<int>(Phase::count);
const char* to_string(Phase p);

// Attributes of a run: everything needed to reproduce and judge it.
struct RunInfo {
  std::string model;       // "resnet50", "vgg16", "bert_base"
  std::string precision;   // "fp32", "tf32", "bf16", "fp16"
  std::string backend;     // "cpu", "cuda"
  std::string variant;     // free-form configuration tag, "" by default (e.g. "static_loss_scale")
  int64_t batch_per_device = 0;
  int64_t image_size = 0;  // 0 for models without images
  int64_t seq_len = 0;     // 0 for models without sequences
  // Schema 1.1: the rest of what changes the work of an iteration (dlperf-reduce groups runs
  // by all of it, with `settings`).
  int64_t num_classes = 0;      // classifier outputs; 0 for models without one (BERT)
  int64_t max_predictions = 0;  // BERT's masked positions per sequence; 0 otherwise
  std::string optimizer;        // "sgd", "adamw", "lamb"
  int64_t parameter_count = 0;  // trainable parameters of the model as built
  std::vector<std::string> settings;  // every dlperf-train option as "name=value", effective values
  int64_t nodes = 1;
  int64_t devices_per_node = 1;
  int64_t world_size = 1;
  int64_t repeat_index = 0;
  int64_t iterations = 0;  // planned iterations, warm-up included
  int64_t warmup = 0;      // planned warm-up iterations
  int64_t threads_per_rank = 0;
  std::string data_source;     // "synthetic", "folder" (ImageNet-style tree), "tar" (WebDataset shards), "hdf5" (BERT shards)
  std::string data_path;       // --data as given, "" for synthetic data
  std::string data_fingerprint;  // what was read, wherever it lay (DataSource::fingerprint); "" for generated data
  std::string decoder;         // image decoder: "cpu", "gpu" (nvJPEG); "" without image files
  int64_t loader_threads = 0;  // image loader threads per rank, 0 without image files
  std::string start_time_utc;  // ISO 8601, "2026-11-21T21:40:00Z"
  std::string end_time_utc;
  std::vector<std::string> hosts;  // per rank
  std::string cpu_model;
  std::string cpu_isa;             // the ISA CPU kernels dispatch to ("avx512_core_bf16"); "" on GPU runs
  std::string gpu_model;           // "" on the CPU backend
  int64_t gpu_memory_bytes = 0;
  std::map<std::string, std::string> versions;  // "dlperf", "onednn", "hdf5", "mpi", "cuda", "cudnn", "nccl", "ucx", "driver"
  std::string slurm_job_id;    // "" outside Slurm
  std::string slurm_nodelist;  // "" outside Slurm
  std::string git_revision;
  std::string command_line;
  std::string nccl_transport;  // "IB", "Socket", "P2P", "SHM", ... "" when NCCL is not used
  std::string gpu_topology;    // nvidia-smi topo -m style text, "" when not known
  int64_t conv_autotune = 0;   // 1: convolution plans chosen by timing (--conv-autotune, CUDA)
  // How the step ran (issue 13): input stage ("direct", "pipelined", "resident"), gradient
  // communicator ("mpi", "nccl", "" on one rank), loss scaling ("none", "fixed", "dynamic"),
  // whether the step was replayed from CUDA graphs, how many steps the per-op profile timed.
  std::string input_mode;
  std::string comm_backend;
  std::string loss_scaling;
  int64_t cuda_graph = 0;
  int64_t profile_ops = 0;
  // Schema 1.3 (issue 25): micro-batches per optimizer step, and the global batch
  // (batch_per_device x grad_accum x world_size). 0 in older files: read as 1 and batch x ranks.
  int64_t grad_accum = 1;
  int64_t global_batch = 0;
  int64_t zero_stage = 0;  // --zero: 0 replicated, 1 sharded optimizer state, 2 and gradients freed per bucket
  // Schema 1.3, LLM runs (issue 24; 0 and "" otherwise; docs/llm.md): training model FLOPs per
  // token (3 x forward, causal attention half), the peak per device and where it came from, and
  // the run's own tokens/s (all ranks, the measured window) and MFU.
  double model_flops_per_token = 0;
  double peak_tflops_per_device = 0;
  std::string peak_source;
  double tokens_per_s = 0;
  double mfu = 0;
  // --zero 1 or 2: the smallest and largest shard (parameter elements a rank owns, over all ranks;
  // balanced: within one element per bucket); 0 otherwise.
  int64_t zero_shard_min = 0, zero_shard_max = 0;
  int64_t memory_plan_bytes = 0;  // the memory plan's total per rank (train/memory/memory_plan.h: with the model built on cpu, else a lower bound); 0: none
  RunStatus status = RunStatus::running;
  std::string status_reason;   // why partial/failed, "" when complete
};

// When one gradient bucket's allreduce was in flight: s on the run's common clock (on a GPU,
// when the collective ran on the NCCL stream, from its CUDA events).
struct BucketTime {
  double start = 0;
  double end = 0;
};

// One iteration on one rank. Times are seconds on the run's common clock: each rank's
// steady clock shifted by its offset to rank 0, measured at start-up. On a GPU the start,
// end and phases come from CUDA events on the compute stream (when the GPU reached them).
struct IterationTiming {
  double start = 0;  // s, common clock
  double end = 0;    // s, common clock
  float phase_seconds[kPhaseCount] = {};  // data, forward, backward, exposed communication (ZeRO's all-gather waits too), optimizer
  float comm_seconds = 0;  // total time gradient allreduces were in flight (overlapped or not)
  float loss = 0;
  float loss_scale = 1;    // the scale this step's backward used (1 without loss scaling)
  bool skipped = false;    // dynamic loss scaling skipped the update (inf/nan gradients)
  std::vector<BucketTime> buckets;  // per gradient bucket, in bucket order; empty on one rank
  // The rank's image loader (0 with generated data): batches it had ready when the step asked
  // for this one, and images decoded and compressed bytes read since the start, at the end of
  // the iteration (differences over time give images/s and bytes/s).
  int64_t data_queue_depth = 0;
  int64_t data_images = 0;
  int64_t data_bytes_read = 0;
  // Schema 1.3: bytes this rank moved in the step's gradient/parameter collectives, as a ring
  // algorithm moves them (docs/communication.md): allreduce of S bytes 2(n-1)/n S, reduce-scatter
  // and all-gather of S bytes (all blocks) (n-1)/n S each. 0 on one rank.
  int64_t comm_bytes = 0;
};

struct RankTrace {
  std::string host;
  int64_t local_rank = -1;         // rank among its node's ranks; -1: not recorded (schema < 1.2)
  uint64_t param_checksum = 0;     // ParamStore::checksum() after the last iteration; 0: not recorded
  double clock_offset = 0;         // s added to this rank's clock to get rank 0's
  int64_t peak_memory_bytes = 0;   // peak resident (CPU) or dlperf's own device allocations (GPU)
  int64_t data_bad_samples = 0;    // samples the rank's loader skipped as unreadable or corrupt
  // Schema 1.3 (issue 27 item 1): the binding the rank got, train/cluster/rank_binding.h's text,
  // "cpus 0-7 (numa 0); gpu 0000:17:00.0 (numa 0); nic mlx5_0 (numa 0)"; "" when not recorded.
  std::string binding;
  int64_t device_memory_peak_bytes = 0;  // GPU: highest memory in use as the device reported it; 0 on CPU
  // Schema 1.3 (issue 25): the backend's allocation counter at its highest (cpu: what the memory
  // plan, RunInfo::memory_plan_bytes, predicts); 0 where the backend keeps none.
  int64_t allocated_peak_bytes = 0;
  std::vector<IterationTiming> iterations;  // completed iterations, in order
};

// --profile-ops: every op's forward and backward time over `steps` measured iterations of one
// rank (CUDA events around each call on a GPU, the clock on the CPU).
struct OpProfileRow {
  std::string name;   // "layer1.0.conv1", or kind#k for ops without parameters ("add#3")
  std::string kind;   // "conv2d", "batch_norm", "linear", "add", "convert", ...
  std::string shape;  // the input it was planned for, "(32, 64, 56, 56) bf16"
  double forward_ms = 0;   // per step: time of its calls in the forward phase
  double backward_ms = 0;  // per step: time of its calls in the backward phase
  int64_t calls = 0;       // calls per step
};
struct OpEvent {  // one call, for the timeline
  int32_t op = 0;           // row index
  int64_t iteration = 0;
  double start = 0, end = 0;  // s, common clock
};
struct OpProfile {
  int64_t rank = 0;
  int64_t first_iteration = 0;  // the profiled iterations are [first, first + steps)
  int64_t steps = 0;
  std::vector<OpProfileRow> rows;
  std::vector<OpEvent> events;
};

// The implementation a library chose for one planned kernel (Backend::planned_kernels).
struct KernelRecord {
  std::string op, pass, shape, impl;
};

struct RunRecord {
  RunInfo info;
  std::vector<KernelRecord> kernels;  // rank 0's planned kernels, in plan order
  std::vector<RankTrace> ranks;  // index = world rank
  OpProfile ops;                 // steps == 0: no profile
  std::string location;  // "results.h5:/runs/run_000003", set by the reader (the writer ignores it)
  // Every micro-batch's samples (--grad-accum).
  int64_t samples_per_iteration_per_rank() const { return info.batch_per_device * std::max<int64_t>(1, info.grad_accum); }
};

}  // namespace dlperf
