// BERT encoder layer: forward and backward (see bert_encoder.h for the data flow).
#include "models/bert_encoder.h"

#include <cmath>

namespace dlperf::bert {

EncoderLayer::EncoderLayer(Backend& be, const BertConfig& c, const std::string& name, const Tensor& x, TensorCache& scratch,
                           TensorCache* shared)
    : acts(shared) {
  const int64_t H = c.hidden, B = c.batch, S = c.seq_len, heads = c.heads, d = H / heads;
  const std::string att = name + ".attention";
  query = be.linear({att + ".self.query", H, H, true}, x);
  key = be.linear({att + ".self.key", H, H, true}, x);
  value = be.linear({att + ".self.value", H, H, true}, x);
  q = acts.keep(query->make_output(), "q"), k = acts.keep(key->make_output(), "k"), v = acts.keep(value->make_output(), "v");  // (M, H)
  const float alpha = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  scores_mm = be.batched_matmul({B * heads, S, S, d, false, true, alpha, heads, MatmulOperand::heads, MatmulOperand::heads,
                                 MatmulOperand::dense},
                                be.dtype());
  context_mm = be.batched_matmul(
      {B * heads, S, d, S, false, false, 1.0f, heads, MatmulOperand::dense, MatmulOperand::heads, MatmulOperand::heads}, be.dtype());
  auto scores_like = be.tensor({B, heads, S, S}, be.dtype());
  scores = &scratch.like("scores", *scores_like);
  softmax = be.masked_softmax(*scores);
  probs = acts.keep(be.tensor_like(*scores), "probs");
  probs_d = acts.keep(be.tensor_like(*scores), "probs_d");
  probs_drop = be.dropout(c.dropout, *probs);
  context = acts.keep(be.tensor_like(*q), "context");
  attn_dense = be.linear({att + ".output.dense", H, H, true}, *context);
  auto a_like = attn_dense->make_output();
  a = &scratch.like("a", *a_like);
  add = be.add(*a, *a, false);  // every (M, H) sum here is plain: one plan serves all
  norm1 = be.dropout_add_norm({{att + ".output.LayerNorm", H, c.layer_norm_eps}, c.dropout}, *a);
  x1 = acts.keep(norm1->make_output(), "x1");
  inter = be.linear({name + ".intermediate.dense", H, c.intermediate, true}, *x1);
  i = acts.keep(inter->make_output(), "i");
  gelu = be.activation(ActivationKind::gelu, *i);
  g = acts.keep(gelu->make_output(), "g");
  output = be.linear({name + ".output.dense", c.intermediate, H, true}, *g);
  auto o_like = output->make_output();
  o = &scratch.like("o", *o_like);
  norm2 = be.dropout_add_norm({{name + ".output.LayerNorm", H, c.layer_norm_eps}, c.dropout}, *o);
  out = norm2->make_output();
}

void EncoderLayer::collect(std::vector<Layer*>& l) {
  for (Layer* p : {static_cast<Layer*>(query.get()), static_cast<Layer*>(key.get()), static_cast<Layer*>(value.get()),
                   static_cast<Layer*>(attn_dense.get()), static_cast<Layer*>(norm1.get()), static_cast<Layer*>(inter.get()),
                   static_cast<Layer*>(output.get()), static_cast<Layer*>(norm2.get())})
    l.push_back(p);
}

void EncoderLayer::forward(const Tensor& x, const Tensor& mask, uint64_t seed) {
  query->forward(x, *q);
  key->forward(x, *k);
  value->forward(x, *v);
  scores_mm->forward(*q, *k, *scores);
  softmax->forward(*scores, mask, *probs);
  probs_drop->forward(*probs, *probs_d, seed);
  context_mm->forward(*probs_d, *v, *context);
  attn_dense->forward(*context, *a);
  norm1->forward(*a, x, *x1, seed + 1);
  inter->forward(*x1, *i);
  gelu->forward(*i, *g);
  output->forward(*g, *o);
  norm2->forward(*o, *x1, *out, seed + 2);
}

void EncoderLayer::recompute(const Tensor& x, const Tensor& mask, uint64_t seed) {
  probs_drop->repeat_last_mask();
  norm1->repeat_last_mask();
  norm2->repeat_last_mask();
  forward(x, mask, seed);
}

EncoderLayer::Grads EncoderLayer::grads(const Tensor& x, TensorCache& cache) const {
  Grads r{};
  r.d_h = &cache.like("d_h", *x1);
  r.d_h2 = &cache.like("d_h2", *x1);
  r.d_inter = &cache.like("d_inter", *g);
  r.d_inter2 = &cache.like("d_inter2", *i);
  r.d_h3 = &cache.like("d_h3", *x1);
  r.d_context = &cache.like("d_h3", *context);
  r.d_scores = &cache.like("d_scores", *probs);
  r.d_v = &cache.like("d_v", *v);
  r.d_scores2 = &cache.like("d_scores2", *probs);
  r.d_q = &cache.like("d_q", *q);
  r.d_k = &cache.like("d_k", *k);
  r.d_x = &cache.like("d_h2", x);
  return r;
}

void EncoderLayer::backward(const Tensor& x, const Tensor& dout, Tensor& dx, TensorCache& cache, const GradReadyFn& ready) {
  const Grads b = grads(x, cache);
  // second half: out = LN2(x1 + drop(output(gelu(inter(x1)))))
  Tensor& ds2 = *b.d_h;   // the residual's gradient
  Tensor& d_o = *b.d_h2;  // output.dense's
  norm2->backward(dout, d_o, ds2);
  ready(*norm2);
  Tensor& dg = *b.d_inter;
  output->backward(*g, d_o, &dg);
  ready(*output);
  Tensor& di = *b.d_inter2;
  gelu->backward(*i, dg, di);
  Tensor& dx1 = *b.d_h3;
  inter->backward(*x1, di, &dx1);
  ready(*inter);
  add->forward(dx1, ds2, dx1);  // the residual path's gradient joins
  // first half: x1 = LN1(x + drop(attn_dense(context)))
  Tensor& ds1 = *b.d_h;  // ds2 is no longer needed
  Tensor& da = *b.d_h2;
  norm1->backward(dx1, da, ds1);
  ready(*norm1);
  Tensor& dctx = *b.d_context;
  attn_dense->backward(*context, da, &dctx);
  ready(*attn_dense);
  Tensor& dprobs_d = *b.d_scores;
  Tensor& dv = *b.d_v;
  context_mm->backward(*probs_d, *v, dctx, dprobs_d, dv);
  Tensor& dprobs = *b.d_scores2;
  probs_drop->backward(dprobs_d, dprobs);
  Tensor& dscores = *b.d_scores;
  softmax->backward(*probs, dprobs, dscores);
  Tensor& dq = *b.d_q;
  Tensor& dk = *b.d_k;
  scores_mm->backward(*q, *k, dscores, dq, dk);
  // x feeds q, k, v and the residual: dx = ds1 + dx_q + dx_k + dx_v
  Tensor& dxp = *b.d_x;
  value->backward(x, dv, &dx);
  ready(*value);
  key->backward(x, dk, &dxp);
  ready(*key);
  add->forward(dx, dxp, dx);
  query->backward(x, dq, &dxp);
  ready(*query);
  add->forward(dx, dxp, dx);
  add->forward(dx, ds1, dx);
}

}  // namespace dlperf::bert
