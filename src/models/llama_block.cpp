// Llama transformer block: forward and backward (see llama_block.h for the data flow).
#include "models/llama_block.h"

namespace dlperf::llama {

Attention::Attention(Backend& be, const LlamaConfig& c, const std::string& name, const Tensor& a, ActivationStore& acts) {
  const int64_t H = c.hidden, D = c.hidden / c.heads, q_out = c.heads * D, kv_out = c.kv_heads * D;
  wq = be.linear({name + ".wq", H, q_out, false}, a);
  wk = be.linear({name + ".wk", H, kv_out, false}, a);
  wv = be.linear({name + ".wv", H, kv_out, false}, a);
  q = acts.keep(wq->make_output(), "q"), k = acts.keep(wk->make_output(), "k"), v = acts.keep(wv->make_output(), "v");
  attention = be.causal_attention({c.batch, c.seq_len, c.heads, c.kv_heads, D}, *q);
  o = acts.keep(attention->make_output(), "o");
  wo = be.linear({name + ".wo", q_out, H, false}, *o);
}

FeedForward::FeedForward(Backend& be, const LlamaConfig& c, const std::string& name, const Tensor& f, ActivationStore& acts) {
  w1 = be.linear({name + ".w1", c.hidden, c.ffn, false}, f);
  w3 = be.linear({name + ".w3", c.hidden, c.ffn, false}, f);
  g1 = acts.keep(w1->make_output(), "g1"), g3 = acts.keep(w3->make_output(), "g3");
  s = acts.keep(be.tensor_like(*g1), "s");
  w2 = be.linear({name + ".w2", c.ffn, c.hidden, false}, *s);
}

TransformerBlock::TransformerBlock(Backend& be, const LlamaConfig& c, const std::string& name, const Tensor& x, TensorCache& scratch,
                                   TensorCache* shared)
    : acts(shared) {
  attention_norm = be.rms_norm({name + ".attention_norm", c.hidden, c.norm_eps}, x);
  a = acts.keep(attention_norm->make_output(), "a");
  attn = std::make_unique<Attention>(be, c, name + ".attention", *a, acts);
  h = acts.keep(be.tensor_like(x), "h");
  ffn_norm = be.rms_norm({name + ".ffn_norm", c.hidden, c.norm_eps}, *h);
  f = acts.keep(ffn_norm->make_output(), "f");
  ffn = std::make_unique<FeedForward>(be, c, name + ".feed_forward", *f, acts);
  out = be.tensor_like(x);
  proj = &scratch.like("proj", x);
}

// Forward order, as Meta's state dict lists them.
void TransformerBlock::collect(std::vector<Layer*>& v) {
  for (Layer* l : {static_cast<Layer*>(attn->wq.get()), static_cast<Layer*>(attn->wk.get()), static_cast<Layer*>(attn->wv.get()),
                   static_cast<Layer*>(attn->wo.get()), static_cast<Layer*>(ffn->w1.get()), static_cast<Layer*>(ffn->w2.get()),
                   static_cast<Layer*>(ffn->w3.get()), static_cast<Layer*>(attention_norm.get()), static_cast<Layer*>(ffn_norm.get())})
    v.push_back(l);
}

void TransformerBlock::forward(const Tensor& x, SharedOps& ops) {
  Attention& at = *attn;
  attention_norm->forward(x, *a);
  at.wq->forward(*a, *at.q);
  at.wk->forward(*a, *at.k);
  at.wv->forward(*a, *at.v);
  ops.rope_q->forward(*at.q, *at.q);
  ops.rope_k->forward(*at.k, *at.k);
  at.attention->forward(*at.q, *at.k, *at.v, *at.o);
  at.wo->forward(*at.o, *proj);
  ops.add->forward(x, *proj, *h);  // h = x + wo(o)
  FeedForward& ff = *ffn;
  ffn_norm->forward(*h, *f);
  ff.w1->forward(*f, *ff.g1);
  ff.w3->forward(*f, *ff.g3);
  ops.swiglu->forward(*ff.g1, *ff.g3, *ff.s);
  ff.w2->forward(*ff.s, *proj);
  ops.add->forward(*h, *proj, *out);  // out = h + w2(s)
}

TransformerBlock::Grads TransformerBlock::grads(TensorCache& cache) const {
  Grads r{};
  r.d_s = &cache.like("d_s", *ffn->s);
  r.d_g1 = &cache.like("d_g1", *ffn->g1);
  r.d_g3 = &cache.like("d_g3", *ffn->g3);
  r.d_f = &cache.like("d_f", *f);
  r.d_f2 = &cache.like("d_f2", *f);
  r.d_h = &cache.like("d_h", *h);
  r.d_o = &cache.like("d_o", *attn->o);
  r.d_q = &cache.like("d_q", *attn->q);
  r.d_k = &cache.like("d_k", *attn->k);
  r.d_v = &cache.like("d_v", *attn->v);
  r.d_a = &cache.like("d_f", *a);  // d_f and d_f2 are free again by then: same (M, H) shape
  r.d_a2 = &cache.like("d_f2", *a);
  return r;
}

void TransformerBlock::backward(const Tensor& x, const Tensor& dout, Tensor& dx, SharedOps& ops, TensorCache& cache,
                                const GradReadyFn& ready) {
  FeedForward& ff = *ffn;
  Attention& at = *attn;
  const Grads b = grads(cache);
  // feed-forward: dh = dout + ffn_norm'(dout through w2, swiglu, w1 and w3)
  Tensor& ds = *b.d_s;
  ff.w2->backward(*ff.s, dout, &ds);
  ready(*ff.w2);
  Tensor& dg1 = *b.d_g1;
  Tensor& dg3 = *b.d_g3;
  ops.swiglu->backward(*ff.g1, *ff.g3, ds, dg1, dg3);
  Tensor& df = *b.d_f;
  Tensor& df2 = *b.d_f2;
  ff.w1->backward(*f, dg1, &df);
  ready(*ff.w1);
  ff.w3->backward(*f, dg3, &df2);
  ready(*ff.w3);
  ops.add->forward(df, df2, df);
  Tensor& dh = *b.d_h;
  ffn_norm->backward(*h, df, dh);
  ready(*ffn_norm);
  ops.add->forward(dh, dout, dh);
  // attention: dx = dh + attention_norm'(dh through wo, attention, RoPE, wq, wk and wv)
  Tensor& d_o = *b.d_o;
  at.wo->backward(*at.o, dh, &d_o);
  ready(*at.wo);
  Tensor& dq = *b.d_q;
  Tensor& dk = *b.d_k;
  Tensor& dv = *b.d_v;
  at.attention->backward(*at.q, *at.k, *at.v, *at.o, d_o, dq, dk, dv);
  ops.rope_q->backward(dq, dq);
  ops.rope_k->backward(dk, dk);
  Tensor& da = *b.d_a;
  Tensor& da2 = *b.d_a2;
  at.wq->backward(*a, dq, &da);
  ready(*at.wq);
  at.wk->backward(*a, dk, &da2);
  ready(*at.wk);
  ops.add->forward(da, da2, da);
  at.wv->backward(*a, dv, &da2);
  ready(*at.wv);
  ops.add->forward(da, da2, da);
  attention_norm->backward(x, da, dx);
  ready(*attention_norm);
  ops.add->forward(dx, dh, dx);
}

}  // namespace dlperf::llama
