// The DLPerf measurement method applied to trace runs (design.md, "Reduce"):
//   per run      throughput = samples in the window / window wall time on the slowest rank,
//                window = iterations [warmup, warmup+window), samples = window*batch*world,
//                warmup and window are the run's own (its recorded --warmup, and its recorded
//                --iterations minus that) unless MethodOptions overrides them for every run,
//                wall time per rank = end of last measured iteration - end of last warm-up one
//                (start of iteration 0 when warmup = 0); the slowest rank is the longest.
//   over repeats median (mean of the middle two for even counts), mean, min, max and
//                coefficient of variation = sample standard deviation (n-1) / mean (0 for n=1).
//   scaling      speedup = median / median of the 1 node x 1 device runs of the same
//                configuration; efficiency = speedup / devices.
// Partial, failed, still-running and too-short runs are excluded and counted.
// A configuration is exact: runs are grouped by every setting that changes the work or how
// it runs (ConfigKey::details), so unlike runs are never averaged into one median.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "trace/run_record.h"

namespace dlperf::analysis {

// DLPerf's fixed warm-up and window, used for a trace that recorded neither (before schema 1.0's
// iterations/warmup attributes were filled in).
inline constexpr int64_t kDefaultWarmup = 20, kDefaultWindow = 100;
// The fewest repeats of a point DLPerf's method takes the median of (it runs 5 to 7).
inline constexpr size_t kMethodRepeats = 5;

struct MethodOptions {
  // Empty: each run's own recorded warm-up and length (runs of different lengths are each
  // measured by their own window). Set: the same warm-up or window for every run.
  std::optional<int64_t> warmup;     // iterations dropped at the start of each run
  std::optional<int64_t> window;     // iterations measured after the warm-up
  double straggler_threshold = 0.05; // a rank is slow in an iteration when its compute exceeds the median by this
  bool include_partial = false;      // measure partial/running runs that have a full window
};

// What identifies comparable runs (the DLPerf tables are one per configuration).
struct ConfigKey {
  std::string model, precision, backend, variant;
  int64_t batch_per_device = 0;
  // Everything else that changes the work or the speed, by name: image and sequence sizes,
  // masked positions, classes, optimizer, data source, parameter count, every other
  // dlperf-train setting the trace recorded (reduced-network sizes, threads, buckets, ...),
  // the dataset read (its fingerprint "dataset", or in older files its path "data-path"), and the build and machine (CPU and its kernel ISA, GPU,
  // library versions; is_identity_detail below).
  std::map<std::string, std::string> details;
  auto operator<=>(const ConfigKey&) const = default;
  // A detail's recorded value, or `otherwise` (a trace from before it was recorded).
  std::string detail(const std::string& name, const std::string& otherwise) const {
    const auto it = details.find(name);
    return it == details.end() ? otherwise : it->second;
  }
  std::string label() const;  // "resnet50_fp32_b128_cpu[_variant]": the JSON and CSV key
  std::string title() const;  // "resnet50 · fp32 · batch 128/device · cpu"
};
ConfigKey config_key(const RunInfo& info);
// The details that say where and with what build a configuration ran, not what it computes: cpu,
// cpu_isa, gpu, version_*, git_revision, threads, loader-threads, and data-path (older files: the
// path names no content; the "dataset" fingerprint does and is matched). --compare matches a baseline on the rest, so
// another machine or build is compared, never another workload.
bool is_identity_detail(const std::string& name);

// "1n8g" for GPUs, "2n4r" for CPU-backend ranks (DLPerf's names; jobs/ uses the same).
std::string point_name(const std::string& backend, int64_t nodes, int64_t devices_per_node);

struct RunThroughput {
  std::optional<double> samples_per_s;  // empty when the run is too short
  double window_seconds = 0;
  int64_t slowest_rank = -1;
  std::string why_not;  // reason when empty
};
// The warm-up and window that measure this run: the overrides, else what the run recorded.
struct RunWindow {
  int64_t warmup = 0, window = 0;
  auto operator<=>(const RunWindow&) const = default;
};
RunWindow run_window(const RunRecord& run, const MethodOptions& opt);

RunThroughput run_throughput(const RunRecord& run, const MethodOptions& opt);

struct RepeatStats {
  size_t runs = 0;
  double median = 0, mean = 0, min = 0, max = 0, cv = 0;
};
RepeatStats repeat_stats(std::vector<double> values);  // values non-empty

// Where the measured step time goes, averaged over window iterations, ranks and runs.
struct PhaseBreakdown {
  double step_seconds = 0;
  double phase_seconds[kPhaseCount] = {};
  double comm_seconds = 0;  // allreduce in flight, overlapped or not
};

struct ScalePoint {
  int64_t nodes = 1, devices_per_node = 1;
  std::set<RunWindow> windows;  // the windows its included runs were measured by
  int64_t devices() const { return nodes * devices_per_node; }
  std::vector<double> throughputs;  // included runs, in file order
  RepeatStats stats;                // of throughputs (runs = 0: every run excluded)
  std::optional<double> speedup, efficiency;
  PhaseBreakdown phases;
  // Memory per rank, the highest over the included runs and their ranks (0: not recorded): the
  // run's memory plan, the backend's allocation counter (cpu), the resident set (cpu) or dlperf's
  // own device allocations (gpu), and the device's own figure (gpu).
  int64_t memory_plan_bytes = 0, allocated_peak_bytes = 0, peak_memory_bytes = 0, device_peak_bytes = 0;
  int excluded_partial = 0, excluded_failed = 0, excluded_short = 0;
  int included_partial = 0;  // partial or unfinished runs measured under --include-partial
  // LLM runs: the median of the included runs' recorded peak per device (0: unknown), which the
  // point's MFU divides by; a CPU's estimate follows its clock, so runs may record different ones.
  double peak_tflops = 0;
  std::vector<double> peaks;
  // The NCCL transports the included runs recorded ("P2P", "P2P, IB"): they follow from the
  // scale (a one-GPU run has none), so they are shown per point, not part of the configuration.
  std::set<std::string> transports;
};

// LLM configurations (trace schema 1.3, docs/llm.md): what tokens/s and MFU follow from; zeros
// for other models.
struct LlmFacts {
  int64_t seq_len = 0;
  double flops_per_token = 0;  // training model FLOPs per token
  double peak_min = 0, peak_max = 0;  // the runs' recorded peaks per device (TFLOP/s; 0: unknown)
  std::string peak_source;            // where the first run's peak came from (datasheet, estimate, --peak-tflops)
};

struct ConfigResult {
  ConfigKey key;
  LlmFacts llm;
  // The details that tell this configuration apart from another with the same model,
  // precision, batch, backend and variant, and those that differ from the benchmark's own
  // (nonstandard, below), and the label and title that show them:
  // "resnet50_fp32_b32_cpu_image-size=96".
  std::vector<std::pair<std::string, std::string>> shown;
  std::string label, title;
  std::vector<ScalePoint> points;  // by devices, then nodes
  bool has_single_device_baseline = false;
  // Settings that differ from the benchmark its model names (comparable.h): always in
  // `shown`, so a 128x128 run is never labelled plain "resnet50".
  std::vector<std::pair<std::string, std::string>> nonstandard;
  int64_t runs_with_reference_kernels = 0;  // measured runs that planned a reference kernel
  std::string reference_kernel;             // the first such kernel, "op pass shape impl"
  // Measured runs that skipped the optimizer update (fp16 loss scaling: inf/nan gradients) in
  // more than kSkippedShare of their window, and the highest share: such a step does no
  // optimizer work and trains nothing, so its samples/s flatter the machine.
  int64_t runs_mostly_skipped = 0;
  double most_skipped = 0;
};
inline constexpr double kSkippedShare = 0.1;

struct Straggler {
  std::string run;  // location of the run in its file
  int64_t rank = 0;
  std::string host;
  double slow_fraction = 0;  // share of window iterations in which it was slow
  double excess = 0;         // mean compute time over the per-iteration median, as a fraction
};

struct Reduction {
  std::vector<ConfigResult> configs;  // sorted by key
  std::vector<Straggler> stragglers;
  int excluded_partial = 0, excluded_failed = 0, excluded_short = 0;
  // Runs whose nodes held different numbers of ranks (12 as 4 + 8): no DLPerf point (nodes x
  // devices per node) describes them. The first such run, for the note.
  int excluded_uneven = 0;
  std::string first_uneven;
  // Measured runs that ran at the same time on the same CPUs or GPU of a host (two jobs sharing
  // a node without binding): they competed for them, so both figures are suspect.
  int overlapping_pairs = 0;
  std::string first_overlap;          // "A and B on host H (cpus 0-1)"
  int64_t measured_runs = 0;          // runs with a throughput
  int64_t longest_short_run = 0;      // iterations of the longest run excluded as too short
  int64_t longest_short_need = 0;     // warm-up + window that run needed
  std::set<RunWindow> windows;        // the windows the measured runs were measured by
};

Reduction reduce_runs(const std::vector<RunRecord>& runs, const MethodOptions& opt);

// An LLM point's median tokens/s (all devices), model TFLOP/s per device and MFU; empty for
// other models or a point without runs (MFU also when the peak is unknown).
struct LlmPoint {
  double tokens_per_s = 0, tflops_per_device = 0;
  std::optional<double> mfu;
};
std::optional<LlmPoint> llm_point(const ConfigResult& c, const ScalePoint& p);

}  // namespace dlperf::analysis
