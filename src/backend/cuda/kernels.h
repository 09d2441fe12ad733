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

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dlperf::cuda {

enum class ElemType : uint8_t { f32, bf16, f16, s32 };
enum class ActKind : uint8_t { relu, gelu, tanh };

#ifdef __CUDACC__
#define DLPERF_HOST_DEVICE __host__ __device__
#else
#define DLPERF_HOST_DEVICE
#endif
// The key of one dropout call: (seed, call counter) -> the mask stream dropout_keep reads.
DLPERF_HOST_DEVICE inline uint64_t dropout_key(uint64_t seed, uint64_t counter) {
  return seed * 0xd1342543de82ef95ull + (counter + 1) * 0x9e3779b97f4a7c15ull;
}

// CUDA's limit on gridDim.y and gridDim.z (gridDim.x allows 2^31 - 1). Every launcher that
// puts a shape-dependent count on y or z clamps or loops against it; kernel_limits_test checks
// the launch configurations at the largest shapes a user can ask for.
constexpr int64_t kMaxGridYZ = 65535;
constexpr int64_t kMaxGridX = 2147483647;

// Every kernel with the largest block it is launched with (kernel_limits_test checks each
// against cudaFuncGetAttributes on the GPU: registers x threads, shared memory, max threads per
// block). Each .cu file lists its own kernels; kernel_launches() (kernel_table.cpp) joins them.
struct KernelLaunch {
  std::string name;        // "add_norm_bwd<f16, 16 x 1024>"
  const void* func = nullptr;  // the __global__ function
  unsigned threads = 0;    // threads per block at its largest launch
  size_t dynamic_smem = 0;  // dynamic shared memory bytes at that launch
};
void list_kernels_attention_gemm(std::vector<KernelLaunch>& out);
void list_kernels_batch_norm(std::vector<KernelLaunch>& out);
void list_kernels_convert(std::vector<KernelLaunch>& out);
void list_kernels_cross_entropy(std::vector<KernelLaunch>& out);
void list_kernels_eltwise(std::vector<KernelLaunch>& out);
void list_kernels_embedding(std::vector<KernelLaunch>& out);
void list_kernels_layer_norm(std::vector<KernelLaunch>& out);
void list_kernels_llama(std::vector<KernelLaunch>& out);
void list_kernels_masked_softmax(std::vector<KernelLaunch>& out);
void list_kernels_optimizer(std::vector<KernelLaunch>& out);
void list_kernels_pooling(std::vector<KernelLaunch>& out);
void list_kernels_step_gate(std::vector<KernelLaunch>& out);
std::vector<KernelLaunch> kernel_launches();

// Grid for a grid-stride loop over count elements of kThreads-thread blocks: enough blocks to
// fill any GPU, no more (the loop covers the rest).
constexpr int kThreads = 256;
inline unsigned grid_for(int64_t count) {
  const int64_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535 * 8 ? 65535 * 8 : blocks));
}
// Grid of the kernels that give each block one row and loop over rows with stride gridDim.x
// (softmax, cross-entropy, the embedding's chunk and run sums).
inline unsigned rows_grid(int64_t rows) {
  return static_cast<unsigned>(rows < 1 ? 1 : (rows > kMaxGridX ? kMaxGridX : rows));
}

// ---- convert.cu ---------------------------------------------------------------------------
// dst = src over (n, c, hw) elements, any element type to any (s32 <-> f32 exact below 2^24),
// each side either canonical (n, c, hw) or channels-last (n, hw, c). Weights use it too:
// (K, C, R, S) -> (K, R, S, C) is the same index map with n = K, hw = R * S.
cudaError_t launch_convert(const void* src, ElemType src_type, bool src_nhwc, void* dst, ElemType dst_type, bool dst_nhwc,
                           int64_t n, int64_t c, int64_t hw, cudaStream_t s);
// The once-per-step refresh of every weight's compute copy in one launch: segment k converts
// the f32 master src (n, c, hw) canonical into dst of `type`, reordered to (n, hw, c) when krsc
// (channels-last filters). tasks split the segments into blocks' worth of elements [begin, end).
struct CastSegment {
  const float* src = nullptr;
  void* dst = nullptr;
  int64_t n = 1, c = 1, hw = 1;
  ElemType type = ElemType::f32;
  bool krsc = false;
};
struct CastTask {
  int64_t segment = 0, begin = 0, end = 0;
};
constexpr int64_t kCastTaskElems = 16384;  // elements per block of launch_cast_segments
cudaError_t launch_cast_segments(const CastSegment* segments, const CastTask* tasks, int64_t task_count, cudaStream_t s);
// ZeRO's compute-precision all-gather (Backend::pack): run k copies `count` f32 values at flat
// offset `value` to packed word `word`, narrow ones as `narrow_type` (two a word; an odd run's
// last half-word zero), or back with unpack. One block per task (a run's [begin, end)).
struct PackRunEntry {
  int64_t value = 0, count = 0, word = 0;
  int32_t narrow = 0;
};
struct PackTask {
  int64_t run = 0, begin = 0, end = 0;
};
cudaError_t launch_pack_runs(const PackRunEntry* runs, const PackTask* tasks, int64_t task_count, ElemType narrow_type, float* values,
                             float* words, bool unpack, cudaStream_t s);

// The matrix pointers of a batched GEMM whose batch is (images, heads): for operand k in 0..2,
// out[k * images * heads + b * heads + h] = base[k] + (b * image_stride[k] + h * head_stride[k]) * elem_bytes.
// (BERT's head-interleaved operands: image_stride = T * H * D, head_stride = D.)
struct BatchPointers {
  const void* base[3] = {nullptr, nullptr, nullptr};
  int64_t image_stride[3] = {0, 0, 0}, head_stride[3] = {0, 0, 0};
};
cudaError_t launch_batch_pointers(const BatchPointers& p, int64_t elem_bytes, int64_t images, int64_t heads, void** out, cudaStream_t s);

// x[i] = value for i < count.
cudaError_t launch_fill(void* x, ElemType t, int64_t count, float value, cudaStream_t s);
// x[i] uniform in [-1, 1) from a counter-based hash of (seed, i): scratch operands for timing.
cudaError_t launch_fill_uniform(void* x, ElemType t, int64_t count, uint64_t seed, cudaStream_t s);
// y[i] += bias[(i / inner) % channels]: inner = H * W for (N, C, H, W), 1 for NHWC and (M, C).
cudaError_t launch_add_bias(void* y, ElemType t, const float* bias, int64_t count, int64_t channels, int64_t inner,
                            cudaStream_t s);
// dst (rows, dst_channels) = src (rows, src_channels) in the first min(src, dst) channels, zero
// in the rest (both channels-last, the same element type): the 3 -> 4 channel padding of the
// f16/bf16 stem's input and filters, and the 4 -> 3 crop of its filter gradient.
cudaError_t launch_copy_channels(const void* src, int src_channels, void* dst, int dst_channels, int64_t rows, ElemType t, cudaStream_t s);
// y[i] = act(y[i] + bias[(i / inner) % channels]), act = ReLU when relu, else the identity;
// bias may be null (no bias). One pass for a convolution's bias and ReLU.
cudaError_t launch_bias_relu(void* y, ElemType t, const float* bias, int64_t count, int64_t channels, int64_t inner, bool relu,
                             cudaStream_t s);

// ---- eltwise.cu ---------------------------------------------------------------------------
cudaError_t launch_activation_forward(ActKind k, const void* x, void* y, ElemType t, int64_t count, cudaStream_t s);
cudaError_t launch_activation_backward(ActKind k, const void* x, const void* dy, void* dx, ElemType t, int64_t count,
                                       cudaStream_t s);
// y = a + b (relu(a + b) when relu); y may alias a or b.
cudaError_t launch_add(const void* a, const void* b, void* y, ElemType t, int64_t count, bool relu, cudaStream_t s);
// dx = y > 0 ? dy : 0 (ReLU's backward from its output); dx may alias dy.
cudaError_t launch_relu_backward_from_y(const void* y, const void* dy, void* dx, ElemType t, int64_t count, cudaStream_t s);
// y = keep(seed, *counter, i) ? x / (1 - p) : 0, keep ~ Bernoulli(1 - p) from a counter-based
// hash: forward and backward call it with the same (seed, counter) and get the same mask. The
// counter is read on the device, when the kernel runs: a replayed CUDA graph draws a new mask
// after launch_dropout_advance, as an eager step does.
cudaError_t launch_dropout(const void* x, void* y, ElemType t, int64_t count, float p, uint64_t seed, const uint64_t* counter,
                           cudaStream_t s);
// *counter += 1 (one thread): a dropout site's next forward, in stream order.
cudaError_t launch_dropout_advance(uint64_t* counter, cudaStream_t s);

// ---- batch_norm.cu ------------------------------------------------------------------------
// Channels-last batch norm in training mode, fused with the residual add and ReLU, x (rows =
// N*H*W, channels). Launch geometry: tiles of channels (at most `tiles`, the count for one
// channel a lane) x row_blocks blocks of rows.
struct BnNhwcGrid {
  unsigned tiles = 1, row_blocks = 1;
};
BnNhwcGrid bn_nhwc_grid(int64_t rows, int64_t channels, int sm_count);
// Per-layer state, all f32 (C) unless said: gamma, beta (the parameters); running mean and
// variance (updated with momentum, PyTorch's convention); saved mean and 1/std (forward ->
// backward); partial (2 * row_blocks * C) and coef (3 * C) scratch; counters (tiles) ints,
// zero before the first launch and left zero by every launch.
struct BnNhwcState {
  const float* gamma = nullptr;
  const float* beta = nullptr;
  float* running_mean = nullptr;
  float* running_var = nullptr;
  float* save_mean = nullptr;
  float* save_invstd = nullptr;
  float* partial = nullptr;
  float* coef = nullptr;
  int* counters = nullptr;
};
// y = act(bn(x) + z); z may be null (no residual); act = ReLU when relu.
cudaError_t launch_bn_nhwc_forward(const void* x, const void* z, void* y, ElemType t, int64_t rows, int64_t channels, BnNhwcGrid grid,
                                   const BnNhwcState& st, float eps, float momentum, bool relu, cudaStream_t s);
// From the forward's x and y: dx, the f32 parameter gradients, and dz = act'(y) * dy when dz
// is not null (the residual's gradient).
cudaError_t launch_bn_nhwc_backward(const void* x, const void* y, const void* dy, void* dx, void* dz, ElemType t, int64_t rows,
                                    int64_t channels, BnNhwcGrid grid, const BnNhwcState& st, float* dgamma, float* dbeta, bool relu,
                                    cudaStream_t s);

// ---- pooling.cu ---------------------------------------------------------------------------
// Channels-last max pooling over k x k windows: x (n, h, w, c) -> y (n, ho, wo, c), and the
// place of each maximum in its window (row-major, one byte per element of y) for backward.
struct MaxPoolShape {
  int64_t n = 0;
  int c = 0, h = 0, w = 0, ho = 0, wo = 0;
  int k = 1, stride = 1, pad = 0;
};
bool max_pool_nhwc_supported(const MaxPoolShape& s);  // k * k <= 256 (a place fits a byte), pad < k
cudaError_t launch_max_pool_nhwc_forward(const void* x, void* y, uint8_t* places, ElemType t, const MaxPoolShape& s, cudaStream_t st);
// dx = the sum of dy over the windows whose maximum each element was (overwrites dx).
cudaError_t launch_max_pool_nhwc_backward(const void* dy, const uint8_t* places, void* dx, ElemType t, const MaxPoolShape& s,
                                          cudaStream_t st);

// ---- cross_entropy.cu ---------------------------------------------------------------------
// logits (rows, k) with row pitch ld >= k -> lse (rows), totals[0] = mean loss over counted
// rows, totals[1] = count. row_loss (2 * rows) is scratch. A row counts when 0 <= label < k
// and label != ignore_index. The ld - k padding columns (a padded vocabulary) are not classes.
cudaError_t launch_cross_entropy_forward(const void* logits, ElemType t, const int32_t* labels, int64_t rows, int64_t k, int64_t ld,
                                         float smoothing, int32_t ignore_index, float* lse, float* row_loss, float* totals,
                                         cudaStream_t s);
// dlogits = scale (x *device_scale when not null, read as the kernel runs) / count * (softmax - target), zero rows that do not count, zero padding columns.
cudaError_t launch_cross_entropy_backward(const void* logits, ElemType t, const int32_t* labels, const float* lse,
                                          const float* totals, int64_t rows, int64_t k, int64_t ld, float smoothing, int32_t ignore_index,
                                          float scale, const float* device_scale, void* dlogits, cudaStream_t s);

// ---- layer_norm.cu ------------------------------------------------------------------------
// Layer norm over rows of cols, alone (a = the input, r = s = null, p = 0) or fused with the
// dropout and residual add before it: s = r + dropout(a) (stored, for backward), y = LN(s).
// mean, rstd (rows) are saved for backward. The mask's key is dropout_key(seed, *mask_counter)
// (common.cuh), the counter read on the device (launch_dropout); unused when p = 0.
struct AddNormForward {
  const void* a = nullptr;
  const void* r = nullptr;
  void* s = nullptr;
  void* y = nullptr;
  const float* gamma = nullptr;
  const float* beta = nullptr;
  float* mean = nullptr;
  float* rstd = nullptr;
  int64_t rows = 0, cols = 0;
  float eps = 1e-12f, p = 0.0f, scale = 1.0f;
  uint64_t seed = 0;
  const uint64_t* mask_counter = nullptr;  // dropout's call counter, on the device
};
// From x (the layer norm's input: s, or a when unfused), dy, the saved statistics: dx = the
// input's gradient (the residual's, when fused; may be null), da = dropout's backward of it
// (may be null), dgamma and dbeta (f32, overwritten). partial: 2 * blocks * cols floats;
// counter: one int, zero before the first launch and left zero.
struct AddNormBackward {
  const void* x = nullptr;
  const void* dy = nullptr;
  void* dx = nullptr;
  void* da = nullptr;
  const float* gamma = nullptr;
  const float* mean = nullptr;
  const float* rstd = nullptr;
  float* dgamma = nullptr;
  float* dbeta = nullptr;
  float* partial = nullptr;
  int* counter = nullptr;
  int64_t rows = 0, cols = 0;
  float p = 0.0f, scale = 1.0f;
  uint64_t seed = 0;
  const uint64_t* mask_counter = nullptr;  // as AddNormForward's; unused when p = 0
};
struct AddNormGrid {
  unsigned blocks = 1, threads = 256;
  int per_thread = 4;     // columns per thread: 4, 8 or 16 (kernels compiled for each)
  bool supported = true;  // cols within 16 columns x 1,024 threads
};
AddNormGrid add_norm_grid(int64_t rows, int64_t cols, int sm_count);
cudaError_t launch_add_norm_forward(const AddNormForward& f, ElemType t, AddNormGrid g, cudaStream_t s);
cudaError_t launch_add_norm_backward(const AddNormBackward& b, ElemType t, AddNormGrid g, cudaStream_t s);

// ---- embedding.cu -------------------------------------------------------------------------
// y (rows, cols) = w[ids] (w in the compute type); ids outside [0, vocab) give zero rows.
cudaError_t launch_embedding_forward(const int32_t* ids, const void* w, void* y, ElemType t, int64_t rows, int64_t vocab,
                                     int64_t cols, cudaStream_t s);
// out (out_rows, cols) = scatter-add of dy (rows, cols) rows at ids: zeroed first, or added to
// when accumulate. out_type is f32 (embedding table gradients) or dy's type (row gather).
// Deterministic (no atomics) and linear in rows: a radix sort of the ids, then per-chunk and
// per-id sums in a fixed order. Ids outside [0, out_rows) are skipped. scratch: at least
// scatter_rows_scratch_bytes(rows, cols, out_rows) of device memory. The embedding forward
// doubles as the row gather.
size_t scatter_rows_scratch_bytes(int64_t rows, int64_t cols, int64_t out_rows);
unsigned scatter_rows_chunk_grid(int64_t rows);  // blocks of its chunk-sum kernel
cudaError_t launch_scatter_rows(const int32_t* ids, const void* dy, ElemType t, void* out, ElemType out_type, int64_t rows,
                                int64_t out_rows, int64_t cols, bool accumulate, void* scratch, cudaStream_t s);

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
// dst = src (first) or dst += src: gradient accumulation over micro-batches.
cudaError_t launch_accumulate(float* dst, const float* src, int64_t count, bool first, cudaStream_t s);
cudaError_t launch_sum_squares(const float* x, int64_t count, double* partial, double* sums, cudaStream_t s);
// Multi-tensor Adam family over the flat buffers: one segment per parameter (or run of equal
// decay), split into tasks of kOptTaskElems elements, one block each.
// A sharded LAMB's segment (a LambPiece) reads w at w_shift past its range in the shard's
// buffers, and adds its norms into its parameter's (param); elsewhere both are unused.
struct OptSegment {
  int64_t offset = 0, count = 0;
  int64_t first_task = 0, tasks = 0;
  int64_t w_shift = 0, param = 0;
  bool decay = false;
};
struct OptTask {
  int64_t segment = 0, begin = 0, end = 0;  // absolute element range in the flat buffers (the shard's)
};
constexpr int64_t kOptTaskElems = 16384;
// SGD (launch_sgd's update) over every segment in one launch; weight_decay applies to decaying
// segments. Segments start 16-byte aligned for the vector body (any start works, scalar).
cudaError_t launch_sgd_multi(float* w, const float* g, float* m, const OptSegment* segments, const OptTask* tasks, int64_t task_count,
                             float lr, float momentum, float weight_decay, float grad_scale, bool first_step, const float* gate,
                             cudaStream_t s);
// AdamW over every segment; p.weight_decay applies to decaying segments.
cudaError_t launch_adamw_multi(float* w, const float* g, float* m, float* v, const OptSegment* segments, const OptTask* tasks,
                               int64_t task_count, AdamParams p, const float* gate, cudaStream_t s);
// LAMB over every segment in three launches: moments and u (+ per-task f64 sums of w^2, u^2 in
// partial, 2 * task_count doubles), per-segment trust ratios (ratio, segment_count floats),
// then w -= lr * ratio * u. The gate as in launch_adamw; with it nothing of the trust ratio
// reaches the host.
cudaError_t launch_lamb_multi(float* w, const float* g, float* m, float* v, float* update, const OptSegment* segments,
                              int64_t segment_count, const OptTask* tasks, int64_t task_count, AdamParams p, const float* gate,
                              double* partial, float* ratio, cudaStream_t s);
// Sharded LAMB (Backend::lamb_shard_norms / lamb_shard_apply), each segment a piece of a
// parameter, w at w_shift past the shard's index. Norms: the moments as above, then per
// parameter (params of them) the f64 sums of its segments' w^2 and u^2, segments in order,
// into sums[2 * param], sums[2 * param + 1]; every parameter written. Apply: each segment's
// trust ratio from its parameter's sums (after their sum over the ranks), then w -= lr ratio u.
cudaError_t launch_lamb_shard_norms(const float* w, const float* g, float* m, float* v, float* update, const OptSegment* segments,
                                    int64_t segment_count, const OptTask* tasks, int64_t task_count, int64_t params, AdamParams p,
                                    const float* gate, double* partial, double* sums, cudaStream_t s);
cudaError_t launch_lamb_shard_apply(float* w, const float* update, const OptSegment* segments, int64_t segment_count, const OptTask* tasks,
                                    int64_t task_count, const double* sums, float* ratio, float lr, const float* gate, cudaStream_t s);

}  // namespace dlperf::cuda
