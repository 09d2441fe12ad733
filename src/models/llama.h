// Llama 3 decoder-only language models (Grattafiori et al. 2024, "The Llama 3 Herd of Models";
// Meta's reference llama/model.py), pretrained with next-token cross-entropy:
//   llama3_8b    Llama 3.1 8B: vocabulary 128,256, hidden 4,096, 32 layers, 32 query and 8
//                key/value heads (head dim 128), SwiGLU feed-forward 14,336, RMSNorm eps 1e-5,
//                RoPE theta 500,000 with Llama 3.1's scaling (factor 8, low/high frequency
//                factors 1 and 4, original context 8,192), untied output head:
//                8,030,261,248 parameters.
//   llama3_2_1b  Llama 3.2 1B: 16 layers, hidden 2,048, 32/8 heads (head dim 64), feed-forward
//                8,192, RoPE scaling factor 32, output head tied to the embeddings:
//                1,235,814,400 parameters.
// No biases, no dropout. Tests use reduced sizes.
#pragma once

#include <memory>
#include <string>

#include "models/model.h"

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
  float init_std = 0.02f;       // N(0, std) for every matrix; norms start at 1
};

inline bool is_llama_model(const std::string& model) { return model == "llama3_8b" || model == "llama3_2_1b"; }
// The published configurations by --model name ("llama3_8b", "llama3_2_1b"); a usage error
// for any other name.
LlamaConfig llama_preset(const std::string& model);

// The host inputs (HostBatch::ints): "tokens" (B * (T + 1)): each sequence's T + 1 tokens; the
// model reads the first T and predicts the last T (the window shifted by one).
inline constexpr const char* kLlamaTokens = "tokens";

// Checks the configuration (one-line usage errors naming the flag) and plans every op.
std::unique_ptr<Model> make_llama(Backend& be, const LlamaConfig& config);
// Throws the usage error make_llama would, without planning anything.
void validate_llama(const LlamaConfig& c);

// Parameters of a configuration, counted as PyTorch does (a tied table once).
int64_t llama_parameter_count(const LlamaConfig& c);

}  // namespace dlperf
