// One post-LN BERT encoder layer (HuggingFace BertLayer), written above the op interface.
//
//   x (M = B*S, H)
//   q, k, v = Linear(x)                          (M, H), read as (B, heads, S, d) in place
//   scores  = q k^T / sqrt(d)                    (B, heads, S, S)
//   probs   = dropout(softmax(scores + mask))    mask (B, S): 0 keep, -10000 padding
//   context = probs v                            (M, H), written head-interleaved in place
//   x1 = LayerNorm(x + dropout(attention.output.dense(context)))        one DropoutAddNorm op
//   x2 = LayerNorm(x1 + dropout(output.dense(GELU(intermediate.dense(x1)))))  one DropoutAddNorm op
#pragma once

#include "models/bert.h"

namespace dlperf::bert {

struct EncoderLayer {
  // shared: --recompute block (the inner activations in shared buffers, see ActivationStore); null: the layer's own.
  EncoderLayer(Backend& be, const BertConfig& c, const std::string& name, const Tensor& x, TensorCache& scratch, TensorCache* shared);
  void collect(std::vector<Layer*>& v);
  // mask (B, S) f32 additive; seed: this layer's dropout seed.
  void forward(const Tensor& x, const Tensor& mask, uint64_t seed);
  // --recompute block: forward again, just before backward, drawing the same dropout masks.
  void recompute(const Tensor& x, const Tensor& mask, uint64_t seed);
  // dout: gradient of out (read); dx: gradient of x (written). dout and dx must differ.
  void backward(const Tensor& x, const Tensor& dout, Tensor& dx, TensorCache& cache, const GradReadyFn& ready);
  // Backward's gradient scratch from `cache` (shared by the layers of one shape); the model
  // asks for it at build time too, so it is allocated with the model.
  struct Grads {
    Tensor *d_h, *d_h2, *d_inter, *d_inter2, *d_h3, *d_context, *d_scores, *d_v, *d_scores2, *d_q, *d_k, *d_x;
  };
  Grads grads(const Tensor& x, TensorCache& cache) const;

  ActivationStore acts;  // declared first: the members below keep their tensors in it
  std::unique_ptr<Linear> query, key, value, attn_dense, inter, output;
  std::unique_ptr<BatchedMatmul> scores_mm, context_mm;
  std::unique_ptr<MaskedSoftmax> softmax;
  std::unique_ptr<Dropout> probs_drop;
  std::unique_ptr<DropoutAddNorm> norm1, norm2;  // attention.output.LayerNorm, output.LayerNorm
  std::unique_ptr<Activation> gelu;
  std::unique_ptr<Add> add;
  // kept for backward (out: the next layer's input, always the layer's own)
  Tensor *q, *k, *v, *probs, *probs_d, *context, *x1, *i, *g;
  TensorPtr out;
  // forward temporaries shared by all layers (not needed in backward)
  Tensor *scores = nullptr, *a = nullptr, *o = nullptr;
};

}  // namespace dlperf::bert
