// Llama 3 Transformer (see llama.h), written once above the op interface:
//
//   tokens (B, T + 1) -> ids = tokens[:, :T], labels = tokens[:, 1:]      (M = B*T) s32
//   x0 = tok_embeddings(ids)                                              (M, H)
//   x_l = TransformerBlock_l(x_{l-1}), l = 1..L (llama_block.h)           (M, H)
//   n = norm(x_L)                                                         (M, H) RMSNorm
//   logits = output(n) = n W^T (untied) or n E^T (tied to tok_embeddings) (M, V)
//   loss = mean next-token cross-entropy(logits, labels)                  streamed row by row in f32
//
// With --logits-chunk C (LlamaConfig::logits_chunk) the head and its loss run over the M tokens
// in M / C chunks of C rows (row views of n, the labels and dn; one cross-entropy per chunk, each
// dividing by M so that their losses add up to the batch's mean), and only a (C, V) logits
// tensor exists. Backward walks the chunks from the last: it recomputes each chunk's logits
// (the last chunk's are still there), writes the chunk's dlogits over them, and the head's
// backward adds the chunk's weight gradient (backward_add) after the first.
#include "models/llama.h"

#include "core/error.h"
#include "models/init.h"
#include "models/llama_block.h"

namespace dlperf {

namespace {

class Llama final : public Model {
 public:
  Llama(Backend& be, const LlamaConfig& c) : cfg_(c), cache_(be) {
    validate_llama(c);
    const int64_t M = c.batch * c.seq_len, D = c.hidden / c.heads;
    ids_ = be.tensor({M}, DType::s32);
    labels_ = be.tensor({M}, DType::s32);
    tok_ = be.embedding({"tok_embeddings", c.vocab, c.hidden}, *ids_);
    x0_ = tok_->make_output();
    const RopeSpec rope{c.batch, c.seq_len, c.heads, D, c.rope_theta, c.rope_factor, c.rope_low_freq, c.rope_high_freq,
                        c.rope_original_context};
    RopeSpec rope_k = rope;
    rope_k.heads = c.kv_heads;
    const Tensor* cur = x0_.get();
    for (int64_t l = 0; l < c.layers; ++l) {
      blocks_.push_back(
          std::make_unique<llama::TransformerBlock>(be, c, "layers." + std::to_string(l), *cur, cache_, c.recompute ? &cache_ : nullptr));
      cur = blocks_.back()->out.get();
    }
    const llama::TransformerBlock& b0 = *blocks_.front();
    ops_.rope_q = be.rope(rope, *b0.attn->q);
    ops_.rope_k = be.rope(rope_k, *b0.attn->k);
    ops_.swiglu = be.swiglu(*b0.ffn->g1);
    ops_.add = be.add(*x0_, false);
    norm_ = be.rms_norm({"norm", c.hidden, c.norm_eps}, *cur);
    n_ = norm_->make_output();
    // Backward's gradient scratch, allocated with the model (the memory plan counts it, and a
    // batch that cannot fit fails before its first step).
    io_grads();
    for (auto& b : blocks_) b->grads(cache_);
    const int64_t chunk = c.logits_chunk > 0 ? c.logits_chunk : M;
    const bool chunked = chunk < M;
    for (int64_t r = 0; r < M; r += chunk) {
      head_.push_back({chunked ? be.rows_of(*n_, r, chunk) : nullptr, chunked ? be.rows_of(*labels_, r, chunk) : nullptr,
                       chunked ? be.rows_of(cache_.like("d_n", *n_), r, chunk) : nullptr, nullptr});
    }
    const LinearSpec head{"output", c.hidden, c.vocab, false, chunked};
    output_ = c.tied ? be.tied_linear(head, *tok_, head_n(0)) : be.linear(head, head_n(0));
    logits_ = output_->make_output();
    for (auto& h : head_) h.xent = be.token_cross_entropy({c.vocab, 0.0f, -1, chunked ? M : 0}, *logits_);
  }

  // Chunk i's rows of n, the labels and dn: the whole tensors when the head is not chunked.
  const Tensor& head_n(size_t i) const { return head_[i].n ? *head_[i].n : *n_; }
  const Tensor& head_labels(size_t i) const { return head_[i].labels ? *head_[i].labels : *labels_; }
  Tensor& head_dn(size_t i, Tensor& dn) const { return head_[i].dn ? *head_[i].dn : dn; }

  // The gradient of the final norm's output, then of each block's output and input from the
  // last block's down: they alternate between two buffers per shape (a block reads dout while
  // writing dx).
  std::vector<Tensor*> io_grads() {
    std::vector<Tensor*> io{&cache_.like("d_n", *n_), &cache_.like("d_io0", *blocks_.back()->out)};
    for (size_t l = blocks_.size(); l-- > 0;) {
      const Tensor& x = l > 0 ? *blocks_[l - 1]->out : *x0_;
      io.push_back(&cache_.like(io.back() == &cache_.like("d_io0", x) ? "d_io1" : "d_io0", x));
    }
    return io;
  }

  std::string name() const override { return "llama"; }
  int64_t samples_per_step() const override { return cfg_.batch; }

  std::vector<Layer*> layers() override {
    std::vector<Layer*> v{tok_.get()};
    for (auto& b : blocks_) b->collect(v);
    v.push_back(norm_.get());
    if (!cfg_.tied) v.push_back(output_.get());  // tied: the head owns no parameter
    return v;
  }

  std::vector<Tensor*> inputs() override { return {ids_.get(), labels_.get()}; }

  // tokens (B * (T + 1)) -> ids (B*T) = each window's first T, labels (B*T) = its last T.
  void load_into(const HostBatch& batch, std::span<Tensor* const> dst) override {
    const int64_t B = cfg_.batch, T = cfg_.seq_len;
    const auto it = batch.ints.find(kLlamaTokens);
    DLPERF_ASSERT(it != batch.ints.end() && static_cast<int64_t>(it->second.size()) == B * (T + 1), "batch tokens of the planned size");
    const std::vector<int32_t>& tok = it->second;
    std::vector<int32_t> ids(static_cast<size_t>(B * T)), labels(ids.size());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        const int32_t x = tok[static_cast<size_t>(b * (T + 1) + t)], y = tok[static_cast<size_t>(b * (T + 1) + t + 1)];
        if (x < 0 || x >= cfg_.vocab || y < 0 || y >= cfg_.vocab)
          throw_usage_error("tokens: sequence " + std::to_string(b) + " holds id " + std::to_string(x < 0 || x >= cfg_.vocab ? x : y) +
                            " outside the vocabulary [0, " + std::to_string(cfg_.vocab) + ")");
        ids[static_cast<size_t>(b * T + t)] = x;
        labels[static_cast<size_t>(b * T + t)] = y;
      }
    dst[0]->write_indices(ids);
    dst[1]->write_indices(labels);
  }

  void forward() override {
    reading(*tok_);  // tied: the head's weight too
    tok_->forward(*ids_, *x0_);
    const Tensor* cur = x0_.get();
    for (auto& b : blocks_) {
      reading_block(*b);
      b->forward(*cur, ops_);
      cur = b->out.get();
    }
    reading(*norm_);
    norm_->forward(*cur, *n_);
    if (!cfg_.tied) reading(*output_);
    for (size_t i = 0; i < head_.size(); ++i) {  // the last chunk's logits stay for backward
      output_->forward(head_n(i), *logits_);
      head_[i].xent->forward(*logits_, head_labels(i));
    }
  }

  float loss() override {
    float sum = 0.0f;
    for (auto& h : head_) sum += h.xent->loss();
    return sum;
  }
  std::vector<const float*> loss_terms() override {  // the trainer adds them up: the chunks' shares of the mean
    std::vector<const float*> v;
    for (auto& h : head_) v.push_back(h.xent->loss_location());
    return v;
  }

  void backward(const LossGradScale& scale, const GradReadyFn& ready) override {
    const Tensor& last = *blocks_.back()->out;
    const std::vector<Tensor*> io = io_grads();
    Tensor& dn = *io[0];
    Tensor* dout = io[1];
    // tied: the head writes the embedding table's gradient first
    if (cfg_.tied) writing(*tok_);
    else writing(*output_);
    for (size_t i = head_.size(); i-- > 0;) {
      if (i + 1 < head_.size()) output_->forward(head_n(i), *logits_);  // recompute the chunk's logits
      head_[i].xent->backward(*logits_, scale);  // the gradient over the logits: no second (rows, V) tensor
      if (i + 1 == head_.size()) output_->backward(head_n(i), *logits_, &head_dn(i, dn));
      else output_->backward_add(head_n(i), *logits_, &head_dn(i, dn));
    }
    if (!cfg_.tied) ready(*output_);
    writing(*norm_);
    norm_->backward(last, dn, *dout);
    ready(*norm_);
    for (size_t l = blocks_.size(); l-- > 0;) {
      const Tensor& x = l > 0 ? *blocks_[l - 1]->out : *x0_;
      Tensor* dx = io[blocks_.size() - l + 1];
      // Refill the shared activations (same kernels, same bits); the last block's are still there.
      if (cfg_.recompute && l + 1 < blocks_.size()) blocks_[l]->forward(x, ops_);
      writing_block(*blocks_[l]);
      blocks_[l]->backward(x, *dout, *dx, ops_, cache_, ready);
      dout = dx;
    }
    writing(*tok_);
    tok_->backward(*ids_, *dout);  // tied: adds to the head's part
    ready(*tok_);
  }

  // N(0, init_std) for every matrix and the embeddings (as torchtitan's and HuggingFace's
  // Llama initialise them), RMSNorm weights 1.
  void init_params(uint64_t seed) override {
    Rng rng(seed);
    for (Layer* l : layers())
      for (size_t i = 0; i < l->params().size(); ++i) {
        const ParamSpec& p = l->params()[i];
        std::vector<float> v(static_cast<size_t>(product(p.dims)));
        if (p.role == ParamRole::norm_scale) fill(v, 1.0f);
        else normal_init(v, cfg_.init_std, rng);
        l->write_param(i, v);
      }
  }

 private:
  LlamaConfig cfg_;
  TensorCache cache_;
  TensorPtr ids_, labels_;  // (M) s32
  std::unique_ptr<Embedding> tok_;
  std::vector<std::unique_ptr<llama::TransformerBlock>> blocks_;
  llama::SharedOps ops_;
  std::unique_ptr<RmsNorm> norm_;
  std::unique_ptr<Linear> output_;
  // The output head's chunks of tokens (one, with no views, unless --logits-chunk): row views
  // of n, the labels and dn, and the chunk's cross-entropy.
  struct HeadChunk {
    TensorPtr n, labels, dn;
    std::unique_ptr<SoftmaxCrossEntropy> xent;
  };
  std::vector<HeadChunk> head_;
  TensorPtr x0_, n_, logits_;  // (M, H), (M, H), (chunk rows, V)
};

}  // namespace

std::unique_ptr<Model> make_llama(Backend& be, const LlamaConfig& config) { return std::make_unique<Llama>(be, config); }

}  // namespace dlperf
