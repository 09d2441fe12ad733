// One Llama transformer block (Meta's llama/model.py: Attention, FeedForward, TransformerBlock),
// written above the op interface. M = B*T rows, H hidden, Hq/Hkv heads of D, F feed-forward:
//
//   x                                              (M, H)
//   Attention:   a = attention_norm(x)             (M, H)    RMSNorm
//                q = wq(a) (M, Hq*D), k = wk(a), v = wv(a) (M, Hkv*D)
//                q, k = RoPE(q), RoPE(k)           in place
//                o = causal GQA attention(q, k, v) (M, Hq*D) blockwise, no (Hq, T, T) buffer
//                h = x + wo(o)                     (M, H)
//   FeedForward: f = ffn_norm(h)                   (M, H)    RMSNorm
//                s = silu(w1(f)) * w3(f)           (M, F)
//                out = h + w2(s)                   (M, H)
#pragma once

#include "models/llama.h"

namespace dlperf::llama {

// Ops planned once and shared by every block (no parameters, no per-call state).
struct SharedOps {
  std::unique_ptr<Rope> rope_q, rope_k;
  std::unique_ptr<SwiGlu> swiglu;
  std::unique_ptr<Add> add;  // (M, H) sums, in place
};

struct Attention {
  Attention(Backend& be, const LlamaConfig& c, const std::string& name, const Tensor& a, ActivationStore& acts);
  std::unique_ptr<Linear> wq, wk, wv, wo;
  std::unique_ptr<CausalAttention> attention;  // per block: it keeps its forward's log-sum-exp
  Tensor *q, *k, *v, *o;                       // (M, Hq*D), (M, Hkv*D) x 2, (M, Hq*D): kept for backward
};

struct FeedForward {
  FeedForward(Backend& be, const LlamaConfig& c, const std::string& name, const Tensor& f, ActivationStore& acts);
  std::unique_ptr<Linear> w1, w2, w3;
  Tensor *g1, *g3, *s;  // (M, F): gate, up, their product; kept for backward
};

struct TransformerBlock {
  // shared: --recompute block (the inner activations in shared buffers, see ActivationStore); null: the block's own.
  TransformerBlock(Backend& be, const LlamaConfig& c, const std::string& name, const Tensor& x, TensorCache& scratch, TensorCache* shared);
  void collect(std::vector<Layer*>& v);
  void forward(const Tensor& x, SharedOps& ops);
  // dout: gradient of out (read); dx: gradient of x (written). dout and dx must differ.
  void backward(const Tensor& x, const Tensor& dout, Tensor& dx, SharedOps& ops, TensorCache& cache, const GradReadyFn& ready);
  // Backward's gradient scratch from `cache` (shared by the blocks of one shape); the model
  // asks for it at build time too, so it is allocated with the model.
  struct Grads {
    Tensor *d_s, *d_g1, *d_g3, *d_f, *d_f2, *d_h, *d_o, *d_q, *d_k, *d_v, *d_a, *d_a2;
  };
  Grads grads(TensorCache& cache) const;

  ActivationStore acts;  // declared first: the members below keep their tensors in it
  std::unique_ptr<RmsNorm> attention_norm, ffn_norm;
  std::unique_ptr<Attention> attn;
  std::unique_ptr<FeedForward> ffn;
  Tensor *a, *h, *f;              // (M, H), kept for backward
  TensorPtr out;                   // (M, H): the next block's input, always the block's own
  Tensor* proj = nullptr;          // (M, H) forward scratch shared by all blocks: wo(o), w2(s)
};

}  // namespace dlperf::llama
