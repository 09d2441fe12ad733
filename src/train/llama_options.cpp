#include "train/llama_options.h"

namespace dlperf {

LlamaConfig llama_config(const TrainOptions& o) {
  LlamaConfig c = llama_preset(o.model);
  const auto take = [](int64_t flag, int64_t& field) {
    if (flag != -1) field = flag;  // -1: the preset's value
  };
  take(o.llama_layers, c.layers), take(o.llama_hidden, c.hidden), take(o.llama_heads, c.heads);
  take(o.llama_kv_heads, c.kv_heads), take(o.llama_ffn, c.ffn), take(o.llama_vocab, c.vocab);
  c.batch = o.batch_size, c.seq_len = o.seq_len;
  c.recompute = o.recompute == "block";
  return c;
}

}  // namespace dlperf
