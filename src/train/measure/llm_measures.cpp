#include "train/measure/llm_measures.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "comm/topology.h"
#include "train/cluster/cluster.h"
#include "train/cluster/rank_binding.h"
#include "train/llama_options.h"

namespace dlperf {

// This rank's CPU peak for MFU: its threads, at most the physical cores it may run on (SMT
// siblings share their core's FMA units), at its ISA's FLOPs per cycle and its clock.
PeakFlops cpu_rank_peak(const TrainOptions& o, const std::string& isa) {
  const int cores = static_cast<int>(cores_of(Topology::this_machine(), current_cpus()).size());
  const int used = cores > 0 ? std::min(o.threads, cores) : o.threads;
  PeakFlops p = peak_flops(o.peak_tflops, o.backend, o.precision, "", isa, used);
  if (used < o.threads && o.peak_tflops <= 0) p.source += " (" + std::to_string(o.threads) + " threads on " + std::to_string(cores) + " cores)";
  return p;
}

LlmMeasures llm_measures(const TrainOptions& o, int world_size, double samples_per_s, const PeakFlops& peak) {
  LlmMeasures m;
  m.flops_per_token = 3.0 * llama_forward_flops_per_token(llama_config(o));
  m.tokens_per_s = samples_per_s * static_cast<double>(o.seq_len);
  m.tokens_per_s_device = m.tokens_per_s / static_cast<double>(world_size);
  m.tflops_per_device = m.tokens_per_s_device * m.flops_per_token / 1e12;
  m.peak = peak;
  m.mfu = m.peak.tflops > 0 ? m.tflops_per_device / m.peak.tflops : 0.0;
  m.mfu_full_attention = m.mfu * llama_forward_flops_per_token(llama_config(o), true) / llama_forward_flops_per_token(llama_config(o));
  return m;
}

PeakFlops mean_peak(const std::vector<double>& tflops, const std::vector<std::string>& sources) {
  if (tflops.empty()) return {};
  double sum = 0;
  for (double t : tflops) {
    if (!(t > 0)) return {0, "a rank's peak is unknown: give --peak-tflops"};
    sum += t;
  }
  const std::string each = per_rank_value(sources);
  if (sources.size() < 2 || each == sources.front()) return {sum / static_cast<double>(tflops.size()), sources.front()};
  return {sum / static_cast<double>(tflops.size()), "mean of the ranks' " + each};
}

std::string llm_summary(const LlmMeasures& m) {
  // The numbers formatted; the peak's source (any length: one per rank when they differ) appended.
  char head[256], tail[160];
  std::snprintf(head, sizeof head, "llm: %.1f tokens/s (%.1f per device); %.4g model TFLOP/s per device; ", m.tokens_per_s,
                m.tokens_per_s_device, m.tflops_per_device);
  if (!(m.peak.tflops > 0)) return head + ("MFU unknown (" + m.peak.source + ")\n");
  char mfu[96];
  std::snprintf(mfu, sizeof mfu, "MFU %.2f%% of %.4g TFLOP/s (", 100.0 * m.mfu, m.peak.tflops);
  std::snprintf(tail, sizeof tail, "); %.2f%% counting attention over all keys (PaLM's 6N + 12LHT, as torchtitan counts)\n",
                100.0 * m.mfu_full_attention);
  return head + (mfu + m.peak.source + tail);
}

}  // namespace dlperf
