// Launchers of the CUDA backend's own kernels (convert.cu, eltwise.cu, cross_entropy.cu,
// layer_norm.cu, embedding.cu, masked_softmax.cu, optimizer.cu). Each enqueues on the given
// stream and returns cudaGetLastError(); the op classes wrap the call in DLPERF_CHECK.
//
// This header is included by nvcc, which compiles .cu files as C++17: it must not include
// the C++20 headers of the rest of dlperf (backend.h, core/check.h). Element types therefore
// have their own enum here, with the same values as dlperf::DType (static_assert in context.h).
// All arithmetic is f32 whatever the storage type.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace dlperf::cuda {

enum class ElemType : uint8_t { f32, bf16, f16, s32 };
enum class ActKind : uint8_t { relu, gelu, tanh };

// ---- convert.cu ---------------------------------------------------------------------------
// dst = src over (n, c, hw) elements, any element type to any (s32 <-> f32 exact below 2^24),
// each side either canonical (n, c, hw) or channels-last (n, hw, c). Weights use it too:
// (K, C, R, S) -> (K, R, S, C) is the same index map with n = K, hw = R * S.
cudaError_t launch_convert(const void* src, ElemType src_type, bool src_nhwc, void* dst, ElemType dst_type, bool dst_nhwc,
                           int64_t n, int64_t c, int64_t hw, cudaStream_t s);
// x[i] = value for i < count.
cudaError_t launch_fill(void* x, ElemType t, int64_t count, float value, cudaStream_t s);
// y[i] += bias[(i / inner) % channels]: inner = H * W for (N, C, H, W), 1 for NHWC and (M, C).
cudaError_t launch_add_bias(void* y, ElemType t, const float* bias, int64_t count, int64_t channels, int64_t inner,
                            cudaStream_t s);

// ---- eltwise.cu ---------------------------------------------------------------------------
cudaError_t launch_activation_forward(ActKind k, const void* x, void* y, ElemType t, int64_t count, cudaStream_t s);
cudaError_t launch_activation_backward(ActKind k, const void* x, const void* dy, void* dx, ElemType t, int64_t count,
                                       cudaStream_t s);
// y = a + b (relu(a + b) when relu); y may alias a or b.
cudaError_t launch_add(const void* a, const void* b, void* y, ElemType t, int64_t count, bool relu, cudaStream_t s);
// dx = y > 0 ? dy : 0 (ReLU's backward from its output); dx may alias dy.
cudaError_t launch_relu_backward_from_y(const void* y, const void* dy, void* dx, ElemType t, int64_t count, cudaStream_t s);
// y = keep(seed, counter, i) ? x / (1 - p) : 0, keep ~ Bernoulli(1 - p) from a counter-based
// hash: forward and backward call it with the same (seed, counter) and get the same mask.
cudaError_t launch_dropout(const void* x, void* y, ElemType t, int64_t count, float p, uint64_t seed, uint64_t counter,
                           cudaStream_t s);

// ---- cross_entropy.cu ---------------------------------------------------------------------
// logits (rows, k) -> lse (rows), totals[0] = mean loss over counted rows, totals[1] = count.
// row_loss (2 * rows) is scratch. A row counts when 0 <= label < k and label != ignore_index.
cudaError_t launch_cross_entropy_forward(const void* logits, ElemType t, const int32_t* labels, int64_t rows, int64_t k,
                                         float smoothing, int32_t ignore_index, float* lse, float* row_loss, float* totals,
                                         cudaStream_t s);
// dlogits = scale (x *device_scale when not null, read as the kernel runs) / count * (softmax -
// target), zero rows that do not count.
cudaError_t launch_cross_entropy_backward(const void* logits, ElemType t, const int32_t* labels, const float* lse,
                                          const float* totals, int64_t rows, int64_t k, float smoothing, int32_t ignore_index,
                                          float scale, const float* device_scale, void* dlogits, cudaStream_t s);

// ---- layer_norm.cu ------------------------------------------------------------------------
// x (rows, cols) -> y; mean, rstd (rows) saved for backward.
cudaError_t launch_layer_norm_forward(const void* x, ElemType t, const float* gamma, const float* beta, void* y, float* mean,
                                      float* rstd, int64_t rows, int64_t cols, float eps, cudaStream_t s);
// Rows of partial sums per column block: layer_norm_partial_rows(rows) * 2 * cols floats of scratch.
int64_t layer_norm_partial_rows(int64_t rows);
cudaError_t launch_layer_norm_backward(const void* x, const void* dy, ElemType t, const float* gamma, const float* mean,
                                       const float* rstd, void* dx, float* dgamma, float* dbeta, float* partial, int64_t rows,
                                       int64_t cols, cudaStream_t s);

// ---- embedding.cu -------------------------------------------------------------------------
// y (rows, cols) = w[ids] (w in the compute type); ids outside [0, vocab) give zero rows.
cudaError_t launch_embedding_forward(const int32_t* ids, const void* w, void* y, ElemType t, int64_t rows, int64_t vocab,
                                     int64_t cols, cudaStream_t s);
// out (out_rows, cols) = scatter-add of dy (rows, cols) rows at ids: zeroed first, or added to
// when accumulate. out_type is f32 (embedding table gradients) or dy's type (row gather).
// Deterministic (no atomics). The embedding forward doubles as the row gather.
cudaError_t launch_scatter_rows(const int32_t* ids, const void* dy, ElemType t, void* out, ElemType out_type, int64_t rows,
                                int64_t out_rows, int64_t cols, bool accumulate, cudaStream_t s);

// ---- masked_softmax.cu --------------------------------------------------------------------
// x (rows, tk) -> y = softmax(x + mask[row / rows_per_batch]); mask (batches, tk) f32.
cudaError_t launch_masked_softmax_forward(const void* x, const float* mask, void* y, ElemType t, int64_t rows, int64_t tk,
                                          int64_t rows_per_batch, cudaStream_t s);
// dx = y * (dy - sum(dy * y)) per row.
cudaError_t launch_masked_softmax_backward(const void* y, const void* dy, void* dx, ElemType t, int64_t rows, int64_t tk,
                                           cudaStream_t s);

// ---- step_gate.cu -------------------------------------------------------------------------
// The step gate (backend/step_gate.h): kGateFloats floats in device memory. These indices
// mirror dlperf::GateField (static_assert in context.h).
enum GateIndex : int {
  kGateSkip,
  kGateGradScale,
  kGateLr,
  kGateApplied,
  kGateLossScale,
  kGateGoodSteps,
  kGateSkipped,
  kGateGradNorm,
  kGateCount
};
struct GateUpdateParams {
  int check_finite;  // dynamic loss scaling
  int64_t growth_interval;
  float clip_norm;   // > 0: clip
  float grad_scale;  // host factor (1 / world size)
};
// One thread applies StepGateUpdate to the gate; sq_sum (f64, launch_sum_squares's sums[0]) is
// read only when check_finite or clip_norm > 0 (may be null otherwise).
cudaError_t launch_gate_update(const double* sq_sum, float* gate, GateUpdateParams p, cudaStream_t s);

// ---- optimizer.cu -------------------------------------------------------------------------
// Every update takes the step gate (nullptr: none). With a gate the kernel reads it as it
// runs: gate[kGateSkip] != 0 changes nothing, lr is multiplied by gate[kGateLr], the gradient
// scale by gate[kGateGradScale], and Adam's bias correction counts gate[kGateApplied] steps.
// PyTorch SGD: d = g * scale + wd * w; m = first ? d : mu * m + d; w -= lr * m.
cudaError_t launch_sgd(float* w, const float* g, float* m, int64_t count, float lr, float momentum, float weight_decay,
                       float grad_scale, bool first_step, const float* gate, cudaStream_t s);

// Adam moments (AdamStep in backend.h): gs = g * scale; m = b1 m + (1 - b1) gs; v = b2 v + (1 - b2) gs^2;
// u = m c1 / (sqrt(v c2) + eps), with the bias corrections c1 = 1 / (1 - b1^t), c2 = 1 / (1 - b2^t).
struct AdamParams {
  float lr, beta1, beta2, eps, weight_decay, grad_scale, c1, c2;
};
// AdamW: w -= lr * (u + weight_decay * w).
cudaError_t launch_adamw(float* w, const float* g, float* m, float* v, int64_t count, AdamParams p, const float* gate,
                         cudaStream_t s);
// LAMB's first half: update = u + weight_decay * w; sums[0] = sum w^2, sums[1] = sum update^2
// (f64, deterministic two-pass reduction through `partial`, kReduceBlocks * 2 doubles).
constexpr int kReduceBlocks = 512;
cudaError_t launch_lamb_update(const float* w, const float* g, float* m, float* v, float* update, int64_t count, AdamParams p,
                               const float* gate, double* partial, double* sums, cudaStream_t s);
// w -= step * update.
cudaError_t launch_axpy(float* w, const float* update, int64_t count, float step, const float* gate, cudaStream_t s);
// sums[0] = sum x^2 in f64.
cudaError_t launch_sum_squares(const float* x, int64_t count, double* partial, double* sums, cudaStream_t s);

}  // namespace dlperf::cuda
