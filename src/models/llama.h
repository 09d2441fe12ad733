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

#include "models/llama_config.h"
#include "models/model.h"

namespace dlperf {

// The host inputs (HostBatch::ints): "tokens" (B * (T + 1)): each sequence's T + 1 tokens; the
// model reads the first T and predicts the last T (the window shifted by one).
inline constexpr const char* kLlamaTokens = "tokens";

// Checks the configuration (one-line usage errors naming the flag) and plans every op.
std::unique_ptr<Model> make_llama(Backend& be, const LlamaConfig& config);

}  // namespace dlperf
