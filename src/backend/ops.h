// The op-level interface every backend implements. An op is planned once for one input
// shape and layout (the constructor does all descriptor, algorithm and workspace work) and
// then run many times; nothing is re-planned inside the timed loop.
//
// Conventions: forward(x, y) writes y; backward(...) writes dx (same layout as x, made with
// Backend::tensor_like(x)) and the layer's parameter gradients (overwriting them). A null dx
// skips the data gradient (the first layer needs none). make_output() allocates a tensor in
// the layout the op produces; the gradient of that output uses the same layout.
#pragma once

#include <cstdint>
#include <memory>

#include "core/error.h"
#include "backend/layer.h"
#include "backend/tensor.h"

namespace dlperf {

// ---- convolutional networks (ResNet-50, VGG16) --------------------------------------------

struct Conv2dSpec {
  std::string name;  // parameter prefix, "layer1.0.conv1"
  int64_t in_channels = 0, out_channels = 0;
  int64_t kernel = 1, stride = 1, padding = 0;
  bool bias = false;
  bool input_grad = true;  // false for a network's first layer: backward never writes dx, so none is planned
  bool fuse_relu = false;  // y = relu(conv(x) + b); backward applies the ReLU mask of the last forward's y
};
// x (N, Cin, H, W) -> y (N, Cout, Ho, Wo), Ho = (H + 2p - k) / s + 1.
// weight (Cout, Cin, k, k), bias (Cout). With fuse_relu, dy in backward is the gradient of the
// ReLU's output, and the y of the last forward must still be alive (it is the next layer's input).
class Conv2d : public Layer {
 public:
  virtual TensorPtr make_output() const = 0;
  virtual void forward(const Tensor& x, Tensor& y) = 0;
  virtual void backward(const Tensor& x, const Tensor& dy, Tensor* dx) = 0;
};

struct BatchNormSpec {
  std::string name;
  int64_t channels = 0;
  float eps = 1e-5f;
  float momentum = 0.1f;   // running = (1 - m) * running + m * batch (PyTorch's convention)
  bool fuse_relu = false;  // y = relu(bn(x)); backward applies the ReLU mask too
  // A residual to add before the ReLU, y = relu(bn(x) + z) (ResNet's bottleneck output, with no
  // separate add or ReLU pass), planned for a z of this tensor's dims and layout. Null: none.
  // Such a batch norm runs with forward_add / backward_add.
  const Tensor* residual = nullptr;
};
// Training mode: x (N, C, H, W) -> y, normalised with batch statistics; the running mean and
// (unbiased) variance are updated as PyTorch does. weight (C), bias (C).
// Backward reads the y of the last forward (the ReLU mask; cuDNN's fused kernels need it too):
// callers keep y alive until then, as every model does.
class BatchNorm : public Layer {
 public:
  virtual TensorPtr make_output() const = 0;
  virtual void forward(const Tensor& x, Tensor& y) = 0;
  virtual void backward(const Tensor& x, const Tensor& dy, Tensor& dx) = 0;
  // With spec.residual: y = act(bn(x) + z), z (N, C, H, W) in the planned residual's layout.
  virtual void forward_add(const Tensor& x, const Tensor& z, Tensor& y) = 0;
  // With spec.residual: dx, the parameter gradients, and dz = act'(y) dy, the gradient the
  // residual receives (in z's layout; dy itself when there is no ReLU).
  virtual void backward_add(const Tensor& x, const Tensor& dy, Tensor& dx, Tensor& dz) = 0;
  virtual void read_running_stats(std::span<float> mean, std::span<float> var) const = 0;  // (C), (C)
  // --recompute block: a block's forward runs twice per step (once more just before its
  // backward); the second must not move the running statistics again. Both backends override
  // this; the default is for a backend that cannot, and says so.
  virtual void set_running_stats_update(bool on) {
    if (!on) throw_usage_error("--recompute: this backend's batch norm cannot skip its running-statistics update");
  }
};

enum class PoolKind : uint8_t { max, avg };
struct Pool2dSpec {
  PoolKind kind = PoolKind::max;
  int64_t kernel = 2, stride = 2, padding = 0;
};
// x (N, C, H, W) -> y (N, C, Ho, Wo); avg excludes padding from the divisor.
class Pool2d {
 public:
  virtual ~Pool2d() = default;
  virtual TensorPtr make_output() const = 0;
  virtual void forward(const Tensor& x, Tensor& y) = 0;
  virtual void backward(const Tensor& dy, Tensor& dx) = 0;
};

// x (N, C, H, W) -> y (N, C), plain layout: the mean over H x W.
class GlobalAvgPool {
 public:
  virtual ~GlobalAvgPool() = default;
  virtual TensorPtr make_output() const = 0;
  virtual void forward(const Tensor& x, Tensor& y) = 0;
  virtual void backward(const Tensor& dy, Tensor& dx) = 0;
};

// ---- shared by every model -----------------------------------------------------------------

struct LinearSpec {
  std::string name;
  int64_t in_features = 0, out_features = 0;
  bool bias = true;
  bool add_grads = false;  // plan backward_add as well (a bias-free layer only)
};
// x (M, in) -> y (M, out) = x W^T + b. weight (out, in), bias (out).
class Linear : public Layer {
 public:
  virtual TensorPtr make_output() const = 0;
  virtual void forward(const Tensor& x, Tensor& y) = 0;
  virtual void backward(const Tensor& x, const Tensor& dy, Tensor* dx) = 0;
  // As backward, but adds the weight gradient to the one already written instead of
  // overwriting it: a layer run over a batch's rows in chunks (Llama's output head over tokens,
  // on row views: Backend::rows_of) calls backward on its first chunk, backward_add on the rest.
  // Planned when the spec asks (add_grads); a tied layer adds to the table's gradient.
  virtual void backward_add(const Tensor& x, const Tensor& dy, Tensor* dx) {
    (void)x, (void)dy, (void)dx;
    throw_usage_error("linear: backward_add was not planned (LinearSpec::add_grads)");
  }
};

enum class ActivationKind : uint8_t { relu, gelu, tanh };  // gelu: the erf form, as BERT uses; tanh: BERT's pooler
// y = f(x), elementwise, any shape; dx = f'(x) * dy.
class Activation {
 public:
  virtual ~Activation() = default;
  virtual TensorPtr make_output() const = 0;
  virtual void forward(const Tensor& x, Tensor& y) = 0;
  virtual void backward(const Tensor& x, const Tensor& dy, Tensor& dx) = 0;
};

// y = a + b (optionally relu(a + b)), same dims; y has a's layout and may alias a
// (accumulation); b may come in another layout (planned for).
// Without ReLU the backward is the identity for both inputs (callers pass dy on); with it,
// backward_relu writes the masked gradient that both inputs receive.
class Add {
 public:
  virtual ~Add() = default;
  virtual void forward(const Tensor& a, const Tensor& b, Tensor& y) = 0;
  virtual void backward_relu(const Tensor& y, const Tensor& dy, Tensor& d) = 0;
};

struct CrossEntropySpec {
  int64_t classes = 0;
  float label_smoothing = 0.0f;  // target = (1 - s) one-hot + s / K
  int32_t ignore_index = -1;     // rows with this label do not count (masked-LM padding)
  // > 0: the mean divides the summed loss by this many rows, not by the rows this op counted.
  // A batch's loss computed in chunks, one op per chunk, each told the batch's row count: the
  // chunks' losses (and gradients) then add up to the batch's mean. Token cross-entropy only.
  int64_t mean_over = 0;
};
// The multiplier of the loss gradient (fp16 loss scaling): value, times *device when device is
// set. device is a float in the backend's memory read when the backward runs, so the trainer
// can keep a dynamic loss scale on the device (the step gate's loss_scale) and a captured
// graph replays with the current scale. A plain float converts to it.
struct LossGradScale {
  LossGradScale(float v = 1.0f) : value(v) {}  // NOLINT(google-explicit-constructor): a plain scale
  LossGradScale(float v, const float* d) : value(v), device(d) {}
  float value = 1.0f;
  const float* device = nullptr;
};

// logits (M, K) any dtype, labels (M) s32 -> mean loss over counted rows, computed in f32.
class SoftmaxCrossEntropy {
 public:
  virtual ~SoftmaxCrossEntropy() = default;
  virtual void forward(const Tensor& logits, const Tensor& labels) = 0;
  virtual float loss() = 0;  // the last forward's loss (waits for it on a GPU)
  // Where the last forward's loss lives in the backend's memory (one f32; device memory on a
  // GPU): the trainer copies it back asynchronously (StepRecorder::value) instead of waiting.
  virtual const float* loss_location() const = 0;
  // dlogits = scale * d(mean loss)/dlogits, in the logits' dtype and layout.
  virtual void backward(Tensor& dlogits, const LossGradScale& scale) = 0;
};

// ---- transformer ops (BERT) -------------------------------------------------------------------

struct LayerNormSpec {
  std::string name;
  int64_t features = 0;
  float eps = 1e-12f;
};
// x (M, C) -> y (M, C), normalised over C; weight (C), bias (C).
class LayerNorm : public Layer {
 public:
  virtual TensorPtr make_output() const = 0;
  virtual void forward(const Tensor& x, Tensor& y) = 0;
  virtual void backward(const Tensor& x, const Tensor& dy, Tensor& dx) = 0;
};

// BERT's sublayer output in one op: s = r + dropout(a), y = LayerNorm(s); a, r, y (M, C)
// plain. The dropout mask comes from (seed, call counter) as Dropout's does. The layer owns the
// layer norm's weight and bias (named spec.norm.name + ".weight" / ".bias").
struct AddNormSpec {
  LayerNormSpec norm;
  float dropout = 0.0f;
};
class DropoutAddNorm : public Layer {
 public:
  virtual TensorPtr make_output() const = 0;
  virtual void forward(const Tensor& a, const Tensor& r, Tensor& y, uint64_t seed) = 0;
  // From dy (of y): da (through the last forward's dropout mask), dr (the residual's gradient,
  // the gradient of s) and the layer norm's parameter gradients.
  virtual void backward(const Tensor& dy, Tensor& da, Tensor& dr) = 0;
  // --recompute block: the next forward draws the last forward's mask again (see Dropout).
  virtual void repeat_last_mask() { throw_usage_error("--recompute: this backend's dropout cannot repeat a mask"); }
};

struct EmbeddingSpec {
  std::string name;
  int64_t vocab = 0, features = 0;
};
// ids (M) s32 -> y (M, C) = weight[ids]; weight (vocab, C). backward scatter-adds dy rows.
class Embedding : public Layer {
 public:
  virtual TensorPtr make_output() const = 0;
  virtual void forward(const Tensor& ids, Tensor& y) = 0;
  virtual void backward(const Tensor& ids, const Tensor& dy) = 0;
};

// y = mask * x / (1 - p), mask ~ Bernoulli(1 - p) drawn from (seed, call counter): the same
// seed gives the same masks. p = 0 is the identity.
class Dropout {
 public:
  virtual ~Dropout() = default;
  virtual void forward(const Tensor& x, Tensor& y, uint64_t seed) = 0;
  virtual void backward(const Tensor& dy, Tensor& dx) = 0;
  // --recompute block: the next forward reuses the last call's counter, so the recomputed
  // forward draws exactly the mask the first one drew (and the one after it moves on as before).
  virtual void repeat_last_mask() { throw_usage_error("--recompute: this backend's dropout cannot repeat a mask"); }
};

// How an operand of a batched matmul is stored. dense: (batch, rows, cols). heads: the batch
// is (B, heads) and each matrix sits head-interleaved inside a (B, rows, heads, cols) tensor,
// the layout a Linear over (B*T, heads*cols) writes; BERT's q, k, v and attention context are
// used in place that way, with no transpose copy.
enum class MatmulOperand : uint8_t { dense, heads };
struct BatchedMatmulSpec {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool transpose_a = false, transpose_b = false;
  float alpha = 1.0f;
  int64_t heads = 1;  // batch = B * heads when any operand is MatmulOperand::heads
  MatmulOperand a_layout = MatmulOperand::dense, b_layout = MatmulOperand::dense, c_layout = MatmulOperand::dense;
};
// c (batch, m, n) = alpha * op(a) op(b); a (batch, m, k) or (batch, k, m) when transposed,
// b (batch, k, n) or (batch, n, k) when transposed (rows and cols of the stored matrices; any
// tensor dims of the right element count). backward writes da and db (overwriting).
class BatchedMatmul {
 public:
  virtual ~BatchedMatmul() = default;
  virtual void forward(const Tensor& a, const Tensor& b, Tensor& c) = 0;
  virtual void backward(const Tensor& a, const Tensor& b, const Tensor& dc, Tensor& da, Tensor& db) = 0;
};

// x (B, H, Tq, Tk) scores, mask (B, Tk) f32 additive (0 keep, -10000 drop, BERT's convention)
// -> y = softmax over Tk of (x + mask). backward needs only y.
class MaskedSoftmax {
 public:
  virtual ~MaskedSoftmax() = default;
  virtual void forward(const Tensor& x, const Tensor& mask, Tensor& y) = 0;
  virtual void backward(const Tensor& y, const Tensor& dy, Tensor& dx) = 0;
};

// x (M, C) -> y (R, C) = x[idx], idx (R) s32 row indices (BERT: the masked positions and the
// first token of each sequence). backward: dx = 0, then dx[idx[r]] += dy[r].
class RowGather {
 public:
  virtual ~RowGather() = default;
  virtual TensorPtr make_output() const = 0;
  virtual void forward(const Tensor& x, const Tensor& idx, Tensor& y) = 0;
  virtual void backward(const Tensor& idx, const Tensor& dy, Tensor& dx) = 0;
};

// ---- decoder-only transformer ops (Llama) ----------------------------------------------------

struct RmsNormSpec {
  std::string name;
  int64_t features = 0;
  float eps = 1e-5f;
};
// x (M, C) -> y (M, C) = x / sqrt(mean(x^2) + eps) * weight, weight (C) (Zhang & Sennrich 2019,
// Llama's RMSNorm: the statistic in f32 whatever the data's dtype). backward writes dx and dweight.
class RmsNorm : public Layer {
 public:
  virtual TensorPtr make_output() const = 0;
  virtual void forward(const Tensor& x, Tensor& y) = 0;
  virtual void backward(const Tensor& x, const Tensor& dy, Tensor& dx) = 0;
};

// Rotary position embedding (Su et al. 2021) as Llama applies it: pairs (x[2i], x[2i+1]) of each
// head rotated by angle pos * freq_i, freq_i = theta^(-2i/D), with Llama 3.1's long-context
// rescaling of the frequencies (factor, low/high frequency factors, original context; factor
// 0: none). Positions restart at 0 for every sequence.
struct RopeSpec {
  int64_t batch = 0, seq_len = 0, heads = 0, head_dim = 0;
  float theta = 500000.0f;
  float scale_factor = 8.0f, low_freq_factor = 1.0f, high_freq_factor = 4.0f;
  int64_t original_context = 8192;
};
// x (B*T, heads*D) -> y, same dims (y may alias x). backward: dx = R^T dy (dx may alias dy).
class Rope {
 public:
  virtual ~Rope() = default;
  virtual void forward(const Tensor& x, Tensor& y) = 0;
  virtual void backward(const Tensor& dy, Tensor& dx) = 0;
};

// SwiGLU (Shazeer 2020): y = silu(a) * b, a = x W1^T (gate), b = x W3^T (up); any same dims.
// backward: da = dy * b * silu'(a), db = dy * silu(a).
class SwiGlu {
 public:
  virtual ~SwiGlu() = default;
  virtual TensorPtr make_output() const = 0;
  virtual void forward(const Tensor& a, const Tensor& b, Tensor& y) = 0;
  virtual void backward(const Tensor& a, const Tensor& b, const Tensor& dy, Tensor& da, Tensor& db) = 0;
};

// Grouped-query causal self-attention; forward saves only each row's log-sum-exp. The CPU
// backend computes it blockwise with an online softmax (Dao 2022, FlashAttention-2), never a
// (heads, T, T) buffer; the CUDA backend in chunks of query rows on cuBLAS products, one
// (kv_heads, chunk, keys) score buffer at a time.
struct AttentionSpec {
  int64_t batch = 0, seq_len = 0, heads = 0, kv_heads = 0, head_dim = 0;
  // CUDA: query rows per chunk of its cuBLAS path (0: the backend's choice; tests set small
  // ones so that a short sequence still crosses chunks). The CPU backend ignores it.
  int64_t query_chunk = 0;
};
// q (B*T, heads*D), k and v (B*T, kv_heads*D) as the projections write them ((B, T, H, D)
// row-major) -> o (B*T, heads*D) = softmax(q k^T / sqrt(D) + causal mask) v, query head h
// reading key/value head h / (heads / kv_heads). backward recomputes the probabilities from the
// saved log-sum-exp of the last forward and writes dq, dk, dv.
class CausalAttention {
 public:
  virtual ~CausalAttention() = default;
  virtual TensorPtr make_output() const = 0;
  virtual void forward(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& o) = 0;
  virtual void backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& dout, Tensor& dq,
                        Tensor& dk, Tensor& dv) = 0;
};

}  // namespace dlperf
