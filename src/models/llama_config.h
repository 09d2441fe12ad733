// Llama 3 configurations (see models/llama.h), plain C++ so that dlperf-train's option parser
// can check them before anything is built.
#pragma once

#include <cstdint>
#include <string>

namespace dlperf {

struct LlamaConfig {
  int64_t layers = 32;
  int64_t hidden = 4096;
  int64_t heads = 32;
  int64_t kv_heads = 8;
  int64_t ffn = 14336;
  int64_t vocab = 128256;
  bool tied = false;            // output head = the token embedding table (Llama 3.2 1B and 3B)
  float norm_eps = 1e-5f;
  float rope_theta = 500000.0f;
  float rope_factor = 8.0f;     // Llama 3.1's frequency rescaling; 0: none
  float rope_low_freq = 1.0f, rope_high_freq = 4.0f;
  int64_t rope_original_context = 8192;
  int64_t batch = 1;            // sequences per device
  int64_t seq_len = 8192;       // tokens per sequence (MLPerf's)
  bool recompute = false;      // --recompute block: blocks keep only their input, forward rerun before backward
  // --logits-chunk: tokens per chunk of the output head and its loss; 0: the whole batch at
  // once. Chunked, the logits are never whole: forward computes each chunk's logits and loss,
  // backward recomputes each chunk's logits (all but the last, still there) for its gradient.
  int64_t logits_chunk = 0;
  float init_std = 0.02f;       // N(0, std) for every matrix; norms start at 1
};

inline bool is_llama_model(const std::string& model) { return model == "llama3_8b" || model == "llama3_2_1b"; }
// The published configurations by --model name ("llama3_8b", "llama3_2_1b"); a usage error
// for any other name.
LlamaConfig llama_preset(const std::string& model);

// Checks a configuration: one-line usage errors naming the flag.
void validate_llama(const LlamaConfig& c);

// --logits-chunk auto: 0 (the whole batch) unless the batch's logits would be f32 and over
// 1 GiB, or over 2^31 - 1 elements (what the kernels index) in any dtype; then the largest
// chunk of tokens that divides the batch's and stays within both. logit_bytes: 4 where the
// logits are f32 (fp32, tf32), 2 otherwise.
int64_t auto_logits_chunk(int64_t tokens, int64_t vocab, int64_t logit_bytes);
inline constexpr int64_t kAutoLogitsChunkBytes = int64_t{1} << 30;

// Parameters of a configuration, counted as PyTorch does (a tied table once).
int64_t llama_parameter_count(const LlamaConfig& c);

// Model FLOPs of one token's forward pass (docs/llm.md): every matmul exactly (2 per multiply-
// add: attention projections, feed-forward, output head) plus attention scores and values over
// the causal half only (a token at position t attends to t + 1 keys: (T + 1) / 2 on average).
// Training counts 3 x forward (backward = 2 x forward); recomputation is not model work.
// full_attention: every query against all T keys instead, as PaLM's 6N + 12 L H T counts (and
// torchtitan reports MFU by): for comparison with such figures.
double llama_forward_flops_per_token(const LlamaConfig& c, bool full_attention = false);

}  // namespace dlperf
