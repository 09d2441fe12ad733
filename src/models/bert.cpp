// BERT pretraining model (see bert.h), written once above the op interface.
//
//   input_ids, segment_ids (B, S) -> word[ids] + position[0..S) + token_type[segment]
//                                  -> LayerNorm -> dropout                       x0 (M = B*S, H)
//   encoder layers (bert_encoder.h)                                              x  (M, H)
//   masked LM:  h = x[b*S + masked_lm_positions]  (B*P, H), gathered before the head as NVIDIA
//               does, so the vocabulary projection costs B*P rows, not B*S
//               -> transform.dense -> GELU -> LayerNorm -> h E^T + bias (B*P, V), E the word table
//               -> cross-entropy over the slots whose position is not 0 (ignore_index)
//   next sentence: pooled = tanh(pooler.dense(x[b*S]))  (B, H) -> seq_relationship (B, 2)
//               -> cross-entropy
//   loss = mlm + nsp
#include "models/bert.h"

#include "core/error.h"
#include "models/bert_encoder.h"
#include "models/init.h"

namespace dlperf {
namespace {

constexpr int32_t kIgnore = -1;  // masked-LM label of an empty slot
constexpr float kMaskValue = -10000.0f;

void validate(const BertConfig& c) {
  const auto positive = [](const char* flag, int64_t v) {
    if (v <= 0) throw_usage_error(std::string("--") + flag + " must be a positive integer (got " + std::to_string(v) + ")");
  };
  positive("batch-size", c.batch);
  positive("seq-len", c.seq_len);
  positive("max-predictions", c.max_predictions);
  positive("bert-layers", c.layers);
  positive("bert-hidden", c.hidden);
  positive("bert-heads", c.heads);
  positive("bert-intermediate", c.intermediate);
  positive("bert-vocab", c.vocab);
  if (c.hidden % c.heads != 0)
    throw_usage_error("--bert-hidden " + std::to_string(c.hidden) + " must be a multiple of --bert-heads " + std::to_string(c.heads));
  if (c.seq_len > c.positions)
    throw_usage_error("--seq-len " + std::to_string(c.seq_len) + " exceeds BERT's " + std::to_string(c.positions) + " positions");
  if (c.max_predictions > c.seq_len)
    throw_usage_error("--max-predictions " + std::to_string(c.max_predictions) + " exceeds --seq-len " + std::to_string(c.seq_len));
  if (!(c.dropout >= 0.0f && c.dropout < 1.0f)) throw_usage_error("--dropout must be in [0, 1)");
}

class Bert final : public BertModel {
 public:
  Bert(Backend& be, const BertConfig& c) : be_(be), cfg_(c), cache_(be) {
    validate(c);
    const int64_t B = c.batch, S = c.seq_len, P = c.max_predictions, H = c.hidden, M = B * S;
    ids_ = be.tensor({M}, DType::s32);
    segments_ = be.tensor({M}, DType::s32);
    positions_ = be.tensor({M}, DType::s32);
    std::vector<int32_t> pos(static_cast<size_t>(M));
    for (int64_t t = 0; t < M; ++t) pos[static_cast<size_t>(t)] = static_cast<int32_t>(t % S);
    positions_->write_indices(pos);
    mask_ = be.tensor({B, S}, DType::f32);
    mlm_rows_ = be.tensor({B * P}, DType::s32);
    mlm_labels_ = be.tensor({B * P}, DType::s32);
    cls_rows_ = be.tensor({B}, DType::s32);
    std::vector<int32_t> cls(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) cls[static_cast<size_t>(b)] = static_cast<int32_t>(b * S);
    cls_rows_->write_indices(cls);
    nsp_labels_ = be.tensor({B}, DType::s32);

    word_ = be.embedding({"bert.embeddings.word_embeddings", c.vocab, H}, *ids_);
    position_ = be.embedding({"bert.embeddings.position_embeddings", c.positions, H}, *positions_);
    token_type_ = be.embedding({"bert.embeddings.token_type_embeddings", c.token_types, H}, *segments_);
    e_word_ = word_->make_output();
    e_pos_ = position_->make_output();
    e_type_ = token_type_->make_output();
    add_ = be.add(*e_word_, *e_pos_, false);  // every (M, H) sum is plain, one plan serves all
    emb_ln_ = be.layer_norm({"bert.embeddings.LayerNorm", H, c.layer_norm_eps}, *e_word_);
    emb_norm_ = emb_ln_->make_output();
    emb_drop_ = be.dropout(c.dropout, *emb_norm_);
    x0_ = be.tensor_like(*emb_norm_);
    const Tensor* cur = x0_.get();
    for (int64_t l = 0; l < c.layers; ++l) {
      layers_.push_back(std::make_unique<bert::EncoderLayer>(be, c, "bert.encoder.layer." + std::to_string(l), *cur, cache_,
                                                            c.recompute ? &cache_ : nullptr));
      cur = layers_.back()->out.get();
    }
    // masked-LM head
    mlm_gather_ = be.gather_rows(*cur, *mlm_rows_);
    h_ = mlm_gather_->make_output();
    transform_ = be.linear({"cls.predictions.transform.dense", H, H, true}, *h_);
    t1_ = transform_->make_output();
    gelu_ = be.activation(ActivationKind::gelu, *t1_);
    t2_ = gelu_->make_output();
    transform_ln_ = be.layer_norm({"cls.predictions.transform.LayerNorm", H, c.layer_norm_eps}, *t2_);
    t3_ = transform_ln_->make_output();
    decoder_ = be.tied_linear({"cls.predictions", H, c.vocab, true}, *word_, *t3_);
    mlm_logits_ = decoder_->make_output();
    mlm_xent_ = be.cross_entropy({c.vocab, 0.0f, kIgnore}, *mlm_logits_);
    // next-sentence head
    cls_gather_ = be.gather_rows(*cur, *cls_rows_);
    c0_ = cls_gather_->make_output();
    pooler_ = be.linear({"bert.pooler.dense", H, H, true}, *c0_);
    p1_ = pooler_->make_output();
    tanh_ = be.activation(ActivationKind::tanh, *p1_);
    pooled_ = tanh_->make_output();
    seq_rel_ = be.linear({"cls.seq_relationship", H, 2, true}, *pooled_);
    nsp_logits_ = seq_rel_->make_output();
    nsp_xent_ = be.cross_entropy({2, 0.0f, kIgnore}, *nsp_logits_);
    // Backward's gradient scratch, allocated with the model (the memory plan counts it, and a
    // batch that cannot fit fails before its first step).
    grads();
    for (size_t l = 0; l < layers_.size(); ++l) layers_[l]->grads(l > 0 ? *layers_[l - 1]->out : *x0_, cache_);
  }

  std::string name() const override { return "bert"; }
  int64_t samples_per_step() const override { return cfg_.batch; }

  // Forward order; the flat buffers hold the reverse, which is the order backward finishes
  // (heads first, the word table last: it waits for its embedding use).
  std::vector<Layer*> layers() override {
    std::vector<Layer*> v{word_.get(), position_.get(), token_type_.get(), emb_ln_.get()};
    for (auto& l : layers_) l->collect(v);
    for (Layer* l : {static_cast<Layer*>(pooler_.get()), static_cast<Layer*>(seq_rel_.get()), static_cast<Layer*>(transform_.get()),
                     static_cast<Layer*>(transform_ln_.get()), static_cast<Layer*>(decoder_.get())})
      v.push_back(l);
    return v;
  }

  // ids, segments (B*S) s32; mask (B, S) f32 additive; masked-LM rows and labels (B*P) s32;
  // next-sentence labels (B) s32.
  std::vector<Tensor*> inputs() override {
    return {ids_.get(), segments_.get(), mask_.get(), mlm_rows_.get(), mlm_labels_.get(), nsp_labels_.get()};
  }
  void load_into(const HostBatch& batch, std::span<Tensor* const> dst) override {
    const int64_t B = cfg_.batch, S = cfg_.seq_len, P = cfg_.max_predictions;
    const auto& in = [&](const char* key, int64_t n) -> const std::vector<int32_t>& {
      const auto it = batch.ints.find(key);
      DLPERF_ASSERT(it != batch.ints.end() && static_cast<int64_t>(it->second.size()) == n,
                    std::string("batch input ") + key + " of the planned size");
      return it->second;
    };
    dst[0]->write_indices(in("input_ids", B * S));
    dst[1]->write_indices(in("segment_ids", B * S));
    const auto& m = in("input_mask", B * S);
    std::vector<float> mask(m.size());
    for (size_t i = 0; i < m.size(); ++i) mask[i] = m[i] ? 0.0f : kMaskValue;
    dst[2]->write(mask);
    const auto& pos = in("masked_lm_positions", B * P);
    const auto& lm = in("masked_lm_ids", B * P);
    std::vector<int32_t> rows(pos.size()), labels(pos.size());
    for (int64_t i = 0; i < B * P; ++i) {
      const auto k = static_cast<size_t>(i);
      if (pos[k] < 0 || pos[k] >= S || lm[k] < 0 || lm[k] >= cfg_.vocab)
        throw_usage_error("masked_lm_positions/ids: slot " + std::to_string(i) + " holds position " + std::to_string(pos[k]) +
                          ", id " + std::to_string(lm[k]) + " (want [0, " + std::to_string(S) + "), [0, " +
                          std::to_string(cfg_.vocab) + "))");
      rows[k] = static_cast<int32_t>((i / P) * S + pos[k]);
      labels[k] = pos[k] == 0 ? kIgnore : lm[k];  // position 0 ([CLS]) marks an empty slot
    }
    dst[3]->write_indices(rows);
    dst[4]->write_indices(labels);
    const auto& nsp = in("next_sentence_labels", B);
    for (int32_t l : nsp)
      if (l != 0 && l != 1) throw_usage_error("next_sentence_labels must be 0 or 1 (got " + std::to_string(l) + ")");
    dst[5]->write_indices(nsp);
  }

  void forward() override {
    const uint64_t seed = cfg_.dropout_seed;
    reading(*word_);  // the decoder's weight too
    word_->forward(*ids_, *e_word_);
    reading(*position_);
    position_->forward(*positions_, *e_pos_);
    reading(*token_type_);
    token_type_->forward(*segments_, *e_type_);
    add_->forward(*e_word_, *e_pos_, *e_word_);
    add_->forward(*e_word_, *e_type_, *e_word_);
    reading(*emb_ln_);
    emb_ln_->forward(*e_word_, *emb_norm_);
    emb_drop_->forward(*emb_norm_, *x0_, seed);
    const Tensor* cur = x0_.get();
    for (size_t l = 0; l < layers_.size(); ++l) {
      reading_block(*layers_[l]);
      layers_[l]->forward(*cur, *mask_, layer_seed(l));
      cur = layers_[l]->out.get();
    }
    mlm_gather_->forward(*cur, *mlm_rows_, *h_);
    reading(*transform_);
    transform_->forward(*h_, *t1_);
    gelu_->forward(*t1_, *t2_);
    reading(*transform_ln_);
    transform_ln_->forward(*t2_, *t3_);
    reading(*decoder_);
    decoder_->forward(*t3_, *mlm_logits_);
    mlm_xent_->forward(*mlm_logits_, *mlm_labels_);
    cls_gather_->forward(*cur, *cls_rows_, *c0_);
    reading(*pooler_);
    pooler_->forward(*c0_, *p1_);
    tanh_->forward(*p1_, *pooled_);
    reading(*seq_rel_);
    seq_rel_->forward(*pooled_, *nsp_logits_);
    nsp_xent_->forward(*nsp_logits_, *nsp_labels_);
  }

  float mlm_loss() override { return mlm_xent_->loss(); }
  float nsp_loss() override { return nsp_xent_->loss(); }
  float loss() override { return mlm_loss() + nsp_loss(); }
  std::vector<const float*> loss_terms() override { return {mlm_xent_->loss_location(), nsp_xent_->loss_location()}; }

  // Backward's gradient scratch (the cache's), asked for at build time too so that it is
  // allocated with the model: the heads', the layers' outputs and inputs from the last layer's
  // down (alternating between two buffers per shape: a layer reads dout while writing dx), the
  // embeddings'.
  struct Grads {
    Tensor *d_mlm_logits, *d_head, *d_head2, *d_h, *d_nsp_logits, *d_pool, *d_pool2, *d_cls, *d_emb, *d_emb2;
    std::vector<Tensor*> io;
  };
  Grads grads() {
    Grads g{};
    g.d_mlm_logits = &cache_.like("d_mlm_logits", *mlm_logits_);
    g.d_head = &cache_.like("d_head", *t3_);
    g.d_head2 = &cache_.like("d_head2", *t2_);
    g.d_h = &cache_.like("d_head2", *h_);
    g.d_nsp_logits = &cache_.like("d_nsp_logits", *nsp_logits_);
    g.d_pool = &cache_.like("d_pool", *pooled_);
    g.d_pool2 = &cache_.like("d_pool2", *p1_);
    g.io.push_back(&cache_.like("d_io0", *layers_.back()->out));
    g.d_cls = &cache_.like("d_io1", *layers_.back()->out);
    for (size_t l = layers_.size(); l-- > 0;) {
      const Tensor& x = l > 0 ? *layers_[l - 1]->out : *x0_;
      g.io.push_back(&cache_.like(g.io.back() == &cache_.like("d_io0", x) ? "d_io1" : "d_io0", x));
    }
    g.d_emb = &cache_.like("d_emb", *emb_norm_);
    g.d_emb2 = &cache_.like("d_emb2", *e_word_);
    return g;
  }

  void backward(const LossGradScale& loss_scale, const GradReadyFn& ready) override {
    const Grads g = grads();
    // masked-LM head (the decoder writes the word table's gradient first)
    Tensor& dlogits = *g.d_mlm_logits;
    mlm_xent_->backward(dlogits, loss_scale);
    Tensor& dt3 = *g.d_head;
    writing(*decoder_);
    writing(*word_);  // the decoder writes the word table's gradient
    decoder_->backward(*t3_, dlogits, &dt3);
    ready(*decoder_);
    Tensor& dt2 = *g.d_head2;
    writing(*transform_ln_);
    transform_ln_->backward(*t2_, dt3, dt2);
    ready(*transform_ln_);
    gelu_->backward(*t1_, dt2, dt3);
    Tensor& dh = *g.d_h;
    writing(*transform_);
    transform_->backward(*h_, dt3, &dh);
    ready(*transform_);
    // next-sentence head
    Tensor& dnsp = *g.d_nsp_logits;
    nsp_xent_->backward(dnsp, loss_scale);
    Tensor& dpooled = *g.d_pool;
    writing(*seq_rel_);
    seq_rel_->backward(*pooled_, dnsp, &dpooled);
    ready(*seq_rel_);
    Tensor& dp1 = *g.d_pool2;
    tanh_->backward(*p1_, dpooled, dp1);
    writing(*pooler_);
    pooler_->backward(*c0_, dp1, &dpooled);
    ready(*pooler_);
    // both heads read the last encoder output
    Tensor* dout = g.io[0];
    mlm_gather_->backward(*mlm_rows_, dh, *dout);
    Tensor& dcls = *g.d_cls;
    cls_gather_->backward(*cls_rows_, dpooled, dcls);
    add_->forward(*dout, dcls, *dout);
    for (size_t l = layers_.size(); l-- > 0;) {
      const Tensor& x = l > 0 ? *layers_[l - 1]->out : *x0_;
      Tensor* dx = g.io[layers_.size() - l];
      // The last layer's activations are still in the shared buffers: no other layer wrote them since.
      if (cfg_.recompute && l + 1 < layers_.size()) layers_[l]->recompute(x, *mask_, layer_seed(l));
      writing_block(*layers_[l]);
      layers_[l]->backward(x, *dout, *dx, cache_, ready);
      dout = dx;
    }
    // embeddings: the three tables receive the same gradient
    Tensor& dnorm = *g.d_emb;
    emb_drop_->backward(*dout, dnorm);
    Tensor& de = *g.d_emb2;
    writing(*emb_ln_);
    emb_ln_->backward(*e_word_, dnorm, de);
    ready(*emb_ln_);
    writing(*token_type_);
    token_type_->backward(*segments_, de);
    ready(*token_type_);
    writing(*position_);
    position_->backward(*positions_, de);
    ready(*position_);
    writing(*word_);
    word_->backward(*ids_, de);  // adds to the decoder's part
    ready(*word_);
  }

  // BERT's initialisation (HuggingFace's _init_weights): N(0, init_std) for weights and
  // embeddings, zero biases, LayerNorm weight 1 and bias 0.
  void init_params(uint64_t seed) override {
    Rng rng(seed);
    for (Layer* l : layers()) {
      for (size_t i = 0; i < l->params().size(); ++i) {
        const ParamSpec& p = l->params()[i];
        std::vector<float> v(static_cast<size_t>(product(p.dims)));
        if (p.role == ParamRole::norm_scale) fill(v, 1.0f);
        else if (p.role == ParamRole::weight || p.role == ParamRole::embedding) normal_init(v, cfg_.init_std, rng);
        else fill(v, 0.0f);
        l->write_param(i, v);
      }
    }
  }

 private:
  // Layer l's dropout seed: forward and its recomputation (--recompute block) must agree.
  uint64_t layer_seed(size_t l) const { return cfg_.dropout_seed + 16 * (l + 1); }

  Backend& be_;
  BertConfig cfg_;
  TensorCache cache_;
  TensorPtr ids_, segments_, positions_, mask_, mlm_rows_, mlm_labels_, cls_rows_, nsp_labels_;  // inputs
  std::unique_ptr<Embedding> word_, position_, token_type_;
  std::unique_ptr<Add> add_;
  std::unique_ptr<LayerNorm> emb_ln_, transform_ln_;
  std::unique_ptr<Dropout> emb_drop_;
  std::vector<std::unique_ptr<bert::EncoderLayer>> layers_;
  std::unique_ptr<RowGather> mlm_gather_, cls_gather_;
  std::unique_ptr<Linear> transform_, decoder_, pooler_, seq_rel_;
  std::unique_ptr<Activation> gelu_, tanh_;
  std::unique_ptr<SoftmaxCrossEntropy> mlm_xent_, nsp_xent_;
  TensorPtr e_word_, e_pos_, e_type_, emb_norm_, x0_;                  // (M, H)
  TensorPtr h_, t1_, t2_, t3_, mlm_logits_;                            // (B*P, H), logits (B*P, V)
  TensorPtr c0_, p1_, pooled_, nsp_logits_;                            // (B, H), logits (B, 2)
};

}  // namespace

std::unique_ptr<BertModel> make_bert(Backend& be, const BertConfig& config) { return std::make_unique<Bert>(be, config); }

int64_t bert_parameter_count(const BertConfig& c) {
  const int64_t H = c.hidden, I = c.intermediate;
  const int64_t embeddings = (c.vocab + c.positions + c.token_types) * H + 2 * H;
  const int64_t layer = 4 * (H * H + H) + 2 * H + (H * I + I) + (I * H + H) + 2 * H;
  const int64_t heads = (H * H + H) /* pooler */ + (H * H + H) + 2 * H /* transform */ + c.vocab /* decoder bias */ + 2 * H + 2;
  return embeddings + c.layers * layer + heads;
}

}  // namespace dlperf
