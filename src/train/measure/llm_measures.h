// What an LLM run reports beyond samples/s (issue 24, docs/llm.md): tokens/s, achieved model
// TFLOP/s per device and model-FLOPs utilisation against the device's peak.
#pragma once

#include <string>
#include <vector>

#include "train/options.h"
#include "train/measure/peak_flops.h"

namespace dlperf {

struct LlmMeasures {
  double flops_per_token = 0;   // training: 3 x forward
  double tokens_per_s = 0;      // all ranks
  double tokens_per_s_device = 0;
  double tflops_per_device = 0;
  double mfu = 0;               // 0 when the peak is unknown
  double mfu_full_attention = 0;  // the same counting attention over all T keys (PaLM's convention)
  PeakFlops peak;
};

// samples_per_s: the job's sequences/s over the measured window (all ranks); peak: per device
// (on the CPU backend the mean of the ranks' own estimates, mean_peak).
LlmMeasures llm_measures(const TrainOptions& o, int world_size, double samples_per_s, const PeakFlops& peak);
// This rank's CPU peak for MFU (its own ISA, clock and cores); each rank's goes to mean_peak.
PeakFlops cpu_rank_peak(const TrainOptions& o, const std::string& isa);
// The ranks' peaks as one per device: their mean, with rank 0's source when every rank's says the
// same, else each one's ("mean of the ranks' estimates: ... (rank 0); ... (rank 1)").
PeakFlops mean_peak(const std::vector<double>& tflops, const std::vector<std::string>& sources);
// "llm: 1234 tokens/s (617 per device); 1.23 TFLOP/s per device; MFU 12.3% of 10.0 TFLOP/s (source)\n"
std::string llm_summary(const LlmMeasures& m);

}  // namespace dlperf
