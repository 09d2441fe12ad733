// Llama 3's published configurations, their checks and parameter counts (models/llama_config.h).
#include "models/llama_config.h"

#include "core/error.h"

namespace dlperf {

LlamaConfig llama_preset(const std::string& model) {
  LlamaConfig c;
  if (model == "llama3_8b") return c;
  if (model == "llama3_2_1b") {
    c.layers = 16, c.hidden = 2048, c.heads = 32, c.kv_heads = 8, c.ffn = 8192, c.tied = true, c.rope_factor = 32.0f;
    return c;
  }
  throw_usage_error("--model '" + model + "' is not a Llama: use llama3_8b or llama3_2_1b");
}

void validate_llama(const LlamaConfig& c) {
  const auto positive = [](const char* flag, int64_t v) {
    if (v <= 0) throw_usage_error(std::string("--") + flag + " must be a positive integer (got " + std::to_string(v) + ")");
  };
  positive("batch-size", c.batch);
  positive("seq-len", c.seq_len);
  positive("llama-layers", c.layers);
  positive("llama-hidden", c.hidden);
  positive("llama-heads", c.heads);
  positive("llama-kv-heads", c.kv_heads);
  positive("llama-ffn", c.ffn);
  positive("llama-vocab", c.vocab);
  if (c.vocab < 2) throw_usage_error("--llama-vocab must be 2 or more: with one token there is nothing to predict (the loss is 0)");
  // As check_layer_sizes does for the other models: one weight indexable (2^31 elements), and a
  // depth no published model comes near (Llama 3.1 405B: 126 layers).
  if (c.layers > 1000) throw_usage_error("--llama-layers " + std::to_string(c.layers) + " is more than 1000");
  if (static_cast<double>(c.vocab) * static_cast<double>(c.hidden) > 2147483647.0)
    throw_usage_error("--llama-vocab " + std::to_string(c.vocab) + " with --llama-hidden " + std::to_string(c.hidden) +
                      ": the embedding would hold more than the 2^31 elements the backends can index");
  if (static_cast<double>(c.ffn) * static_cast<double>(c.hidden) > 2147483647.0)
    throw_usage_error("--llama-ffn " + std::to_string(c.ffn) + " with --llama-hidden " + std::to_string(c.hidden) +
                      ": a feed-forward weight would hold more than the 2^31 elements the backends can index");
  if (c.hidden % c.heads != 0)
    throw_usage_error("--llama-hidden " + std::to_string(c.hidden) + " must be a multiple of --llama-heads " + std::to_string(c.heads));
  if (c.heads % c.kv_heads != 0)
    throw_usage_error("--llama-heads " + std::to_string(c.heads) + " must be a multiple of --llama-kv-heads " + std::to_string(c.kv_heads));
  if ((c.hidden / c.heads) % 2 != 0)
    throw_usage_error("--llama-hidden / --llama-heads = head dim " + std::to_string(c.hidden / c.heads) +
                      " must be even (RoPE rotates pairs)");
  const int64_t tokens = c.batch * c.seq_len;
  if (c.logits_chunk < 0 || (c.logits_chunk > 0 && tokens % c.logits_chunk != 0))
    throw_usage_error("--logits-chunk " + std::to_string(c.logits_chunk) + " must divide the batch's " + std::to_string(tokens) +
                      " tokens (--batch-size x --seq-len), or be 0 (whole) or auto");
}

int64_t auto_logits_chunk(int64_t tokens, int64_t vocab, int64_t logit_bytes) {
  constexpr int64_t kMaxElements = 2147483647;  // 2^31 - 1
  const auto fits = [&](int64_t rows) {
    const int64_t elements = rows * vocab;
    return elements <= kMaxElements && (logit_bytes < 4 || elements * logit_bytes <= kAutoLogitsChunkBytes);
  };
  if (fits(tokens)) return 0;
  for (int64_t parts = 2; parts < tokens; ++parts)
    if (tokens % parts == 0 && fits(tokens / parts)) return tokens / parts;
  return 1;
}

int64_t llama_parameter_count(const LlamaConfig& c) {
  const int64_t H = c.hidden, D = c.hidden / c.heads, q = c.heads * D, kv = c.kv_heads * D;
  const int64_t block = H * q + 2 * H * kv + q * H /* attention */ + 3 * H * c.ffn /* feed-forward */ + 2 * H /* norms */;
  return c.vocab * H * (c.tied ? 1 : 2) + c.layers * block + H;
}

double llama_forward_flops_per_token(const LlamaConfig& c, bool full_attention) {
  const double H = static_cast<double>(c.hidden), D = H / static_cast<double>(c.heads);
  const double q = static_cast<double>(c.heads) * D, kv = static_cast<double>(c.kv_heads) * D, F = static_cast<double>(c.ffn);
  const double projections = 2 * H * q + 2 * 2 * H * kv + 2 * q * H;    // wq, wk, wv, wo
  const double feed_forward = 3 * 2 * H * F;                            // w1, w3, w2
  const double T = static_cast<double>(c.seq_len), keys = full_attention ? T : (T + 1) / 2;
  const double attention = 2 * 2 * D * static_cast<double>(c.heads) * keys;  // q k^T, p v
  return static_cast<double>(c.layers) * (projections + feed_forward + attention) + 2 * H * static_cast<double>(c.vocab);
}

}  // namespace dlperf
