#include "train/llama_options.h"

#include "core/error.h"
#include "core/parse_number.h"

namespace dlperf {

int64_t llama_logit_bytes(const TrainOptions& o) { return o.precision == Precision::fp32 || o.precision == Precision::tf32 ? 4 : 2; }

LlamaConfig llama_config(const TrainOptions& o) {
  LlamaConfig c = llama_preset(o.model);
  const auto take = [](int64_t flag, int64_t& field) {
    if (flag != -1) field = flag;  // -1: the preset's value
  };
  take(o.llama_layers, c.layers), take(o.llama_hidden, c.hidden), take(o.llama_heads, c.heads);
  take(o.llama_kv_heads, c.kv_heads), take(o.llama_ffn, c.ffn), take(o.llama_vocab, c.vocab);
  c.batch = o.batch_size, c.seq_len = o.seq_len;
  c.recompute = o.recompute == "block";
  if (o.logits_chunk == "auto") {
    c.logits_chunk = auto_logits_chunk(c.batch * c.seq_len, c.vocab, llama_logit_bytes(o));
  } else if (const auto v = parse_int64(o.logits_chunk)) {
    c.logits_chunk = *v;  // validate_llama checks it divides the batch's tokens
  } else {
    throw_usage_error("--logits-chunk '" + o.logits_chunk + "' is not a number of tokens, 0 or auto");
  }
  return c;
}

}  // namespace dlperf
