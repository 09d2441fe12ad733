#include "train/measure/llm_measures.h"

#include <cstdio>

#include "train/llama_options.h"

namespace dlperf {

LlmMeasures llm_measures(const TrainOptions& o, int world_size, double samples_per_s, const std::string& gpu_model,
                         const std::string& isa) {
  LlmMeasures m;
  m.flops_per_token = 3.0 * llama_forward_flops_per_token(llama_config(o));
  m.tokens_per_s = samples_per_s * static_cast<double>(o.seq_len);
  m.tokens_per_s_device = m.tokens_per_s / static_cast<double>(world_size);
  m.tflops_per_device = m.tokens_per_s_device * m.flops_per_token / 1e12;
  m.peak = peak_flops(o.peak_tflops, o.backend, o.precision, gpu_model, isa, o.threads);
  m.mfu = m.peak.tflops > 0 ? m.tflops_per_device / m.peak.tflops : 0.0;
  return m;
}

std::string llm_summary(const LlmMeasures& m) {
  char line[512];
  if (m.peak.tflops > 0)
    std::snprintf(line, sizeof line, "llm: %.1f tokens/s (%.1f per device); %.4g model TFLOP/s per device; MFU %.2f%% of %.4g TFLOP/s (%s)\n",
                  m.tokens_per_s, m.tokens_per_s_device, m.tflops_per_device, 100.0 * m.mfu, m.peak.tflops, m.peak.source.c_str());
  else
    std::snprintf(line, sizeof line, "llm: %.1f tokens/s (%.1f per device); %.4g model TFLOP/s per device; MFU unknown (%s)\n",
                  m.tokens_per_s, m.tokens_per_s_device, m.tflops_per_device, m.peak.source.c_str());
  return line;
}

}  // namespace dlperf
