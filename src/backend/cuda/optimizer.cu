// The fused SGD update over a contiguous range of the flat f32 buffers, PyTorch's semantics:
//   d = g * grad_scale + weight_decay * w;  m = momentum * m + d (m = d on the first step);  w -= lr * m.
// grad_scale folds in 1 / (world size * loss scale). One pass, one read of g and w, one
// read-write of m and w: the update is memory bound. Below: AdamW and LAMB (f32 state), and
// the f64 sums of squares LAMB and gradient clipping read back.
#include "backend/cuda/common.cuh"

namespace dlperf::cuda {
namespace {

__global__ void sgd_kernel(float* __restrict__ w, const float* __restrict__ g, float* __restrict__ m, int64_t count, float lr,
                           float momentum, float weight_decay, float grad_scale, bool first_step, const float* gate) {
  if (gate) {  // the step gate (kernels.h): read as the kernel runs, so a captured graph sees the current step's
    if (gate[kGateSkip] != 0.0f) return;
    lr *= gate[kGateLr];
    grad_scale *= gate[kGateGradScale];
  }
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x) {
    const float wi = w[i];
    const float d = g[i] * grad_scale + weight_decay * wi;
    const float v = first_step ? d : momentum * m[i] + d;
    m[i] = v;
    w[i] = wi - lr * v;
  }
}

// SGD over every segment in one launch (one block per task of kOptTaskElems elements): the
// per-range launches cost ~108 launches a ResNet-50 step (conv weights decay, BN parameters do
// not, so ranges alternate). Task ranges start on 64-byte boundaries (ParamStore slots, split at
// multiples of kOptTaskElems), so the body moves float4s; indices within a task are 32-bit.
__global__ void sgd_multi_kernel(float* __restrict__ w, const float* __restrict__ g, float* __restrict__ m, const OptSegment* segments,
                                 const OptTask* tasks, float lr, float momentum, float weight_decay, float grad_scale, bool first_step,
                                 const float* gate) {
  if (gate) {
    if (gate[kGateSkip] != 0.0f) return;
    lr *= gate[kGateLr];
    grad_scale *= gate[kGateGradScale];
  }
  const OptTask t = tasks[blockIdx.x];
  const float wd = segments[t.segment].decay ? weight_decay : 0.0f;
  const int n = static_cast<int>(t.end - t.begin);  // <= kOptTaskElems
  float* wt = w + t.begin;
  const float* gt = g + t.begin;
  float* mt = m + t.begin;
  auto one = [&](float wi, float gi, float mi, float& wo, float& mo) {
    const float d = gi * grad_scale + wd * wi;
    mo = first_step ? d : momentum * mi + d;
    wo = wi - lr * mo;
  };
  // float4 only when all three are 16-byte aligned (a ZeRO shard's group may start anywhere).
  const bool vec = ((reinterpret_cast<uintptr_t>(wt) | reinterpret_cast<uintptr_t>(gt) | reinterpret_cast<uintptr_t>(mt)) & 15u) == 0;
  const int nv = vec ? n / 4 : 0;
  for (int q = static_cast<int>(threadIdx.x); q < nv; q += static_cast<int>(blockDim.x)) {
    float4 wv = reinterpret_cast<float4*>(wt)[q], mv = reinterpret_cast<float4*>(mt)[q];
    const float4 gv = reinterpret_cast<const float4*>(gt)[q];
    one(wv.x, gv.x, mv.x, wv.x, mv.x);
    one(wv.y, gv.y, mv.y, wv.y, mv.y);
    one(wv.z, gv.z, mv.z, wv.z, mv.z);
    one(wv.w, gv.w, mv.w, wv.w, mv.w);
    reinterpret_cast<float4*>(wt)[q] = wv;
    reinterpret_cast<float4*>(mt)[q] = mv;
  }
  for (int i = 4 * nv + static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x)) one(wt[i], gt[i], mt[i], wt[i], mt[i]);
}

}  // namespace

cudaError_t launch_sgd_multi(float* w, const float* g, float* m, const OptSegment* segments, const OptTask* tasks, int64_t task_count,
                             float lr, float momentum, float weight_decay, float grad_scale, bool first_step, const float* gate,
                             cudaStream_t s) {
  if (task_count == 0) return cudaSuccess;
  sgd_multi_kernel<<<static_cast<unsigned>(task_count), kThreads, 0, s>>>(w, g, m, segments, tasks, lr, momentum, weight_decay, grad_scale,
                                                                          first_step, gate);
  return launched();
}

namespace {
__global__ void accumulate_kernel(float* __restrict__ dst, const float* __restrict__ src, int64_t count, bool first) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x)
    dst[i] = first ? src[i] : dst[i] + src[i];
}
}  // namespace

cudaError_t launch_accumulate(float* dst, const float* src, int64_t count, bool first, cudaStream_t s) {
  if (count == 0) return cudaSuccess;
  accumulate_kernel<<<grid_for(count), kThreads, 0, s>>>(dst, src, count, first);
  return launched();
}

cudaError_t launch_sgd(float* w, const float* g, float* m, int64_t count, float lr, float momentum, float weight_decay,
                       float grad_scale, bool first_step, const float* gate, cudaStream_t s) {
  if (count == 0) return cudaSuccess;
  sgd_kernel<<<grid_for(count), kThreads, 0, s>>>(w, g, m, count, lr, momentum, weight_decay, grad_scale, first_step, gate);
  return launched();
}

}  // namespace dlperf::cuda

// ---- Adam family (AdamStep in backend.h), and the f64 reductions LAMB and clipping need ----

namespace dlperf::cuda {
namespace {

// Applies the step gate to an Adam step's parameters; false: the step is skipped.
__device__ __forceinline__ bool gated(AdamParams& p, const float* gate) {
  if (!gate) return true;
  if (gate[kGateSkip] != 0.0f) return false;
  const float t = gate[kGateApplied];  // applied steps, this one included
  p.lr *= gate[kGateLr];
  p.grad_scale *= gate[kGateGradScale];
  p.c1 = 1.0f / (1.0f - powf(p.beta1, t));
  p.c2 = 1.0f / (1.0f - powf(p.beta2, t));
  return true;
}

__device__ __forceinline__ float adam_update(const AdamParams& p, float g, float& m, float& v) {
  const float gs = g * p.grad_scale;
  m = p.beta1 * m + (1.0f - p.beta1) * gs;
  v = p.beta2 * v + (1.0f - p.beta2) * gs * gs;
  return (m * p.c1) / (sqrtf(v * p.c2) + p.eps);
}

#define DLPERF_GRID_STRIDE(i, count) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (count); i += int64_t{gridDim.x} * blockDim.x)

__global__ void adamw_kernel(float* w, const float* g, float* m, float* v, int64_t count, AdamParams p, const float* gate) {
  if (!gated(p, gate)) return;
  DLPERF_GRID_STRIDE(i, count) {
    float mi = m[i], vi = v[i];
    const float u = adam_update(p, g[i], mi, vi);
    m[i] = mi;
    v[i] = vi;
    w[i] -= p.lr * (u + p.weight_decay * w[i]);
  }
}

// Block sums of doubles, fixed order (deterministic). blockDim.x == kThreads.
__device__ double block_sum_f64(double v) {
  __shared__ double part[kThreads];
  part[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  const double r = part[0];
  __syncthreads();
  return r;
}

__global__ void lamb_update_kernel(const float* w, const float* g, float* m, float* v, float* update, int64_t count, AdamParams p,
                                   const float* gate, double* partial) {
  double w_sq = 0.0, u_sq = 0.0;
  if (!gated(p, gate)) count = 0;  // skipped: m and v unchanged, zero norms (every thread still joins the block sums)
  DLPERF_GRID_STRIDE(i, count) {
    float mi = m[i], vi = v[i];
    const float u = adam_update(p, g[i], mi, vi) + p.weight_decay * w[i];
    m[i] = mi;
    v[i] = vi;
    update[i] = u;
    w_sq += static_cast<double>(w[i]) * w[i];
    u_sq += static_cast<double>(u) * u;
  }
  w_sq = block_sum_f64(w_sq);
  u_sq = block_sum_f64(u_sq);
  if (threadIdx.x == 0) {
    partial[2 * blockIdx.x] = w_sq;
    partial[2 * blockIdx.x + 1] = u_sq;
  }
}

__global__ void sum_squares_kernel(const float* x, int64_t count, double* partial) {
  double s = 0.0;
  DLPERF_GRID_STRIDE(i, count) { s += static_cast<double>(x[i]) * x[i]; }
  s = block_sum_f64(s);
  if (threadIdx.x == 0) {
    partial[2 * blockIdx.x] = s;
    partial[2 * blockIdx.x + 1] = 0.0;
  }
}

// sums[0..1] = column sums of partial (blocks, 2).
__global__ void finish_sums(const double* partial, int blocks, double* sums) {
  double a = 0.0, b = 0.0;
  for (int i = threadIdx.x; i < blocks; i += blockDim.x) {
    a += partial[2 * i];
    b += partial[2 * i + 1];
  }
  a = block_sum_f64(a);
  b = block_sum_f64(b);
  if (threadIdx.x == 0) {
    sums[0] = a;
    sums[1] = b;
  }
}

// Multi-tensor AdamW: one block per task; the gate as in adamw_kernel.
__global__ void adamw_multi_kernel(float* w, const float* g, float* m, float* v, const OptSegment* segments, const OptTask* tasks,
                                   AdamParams p, const float* gate) {
  if (!gated(p, gate)) return;
  const OptTask t = tasks[blockIdx.x];
  const float wd = segments[t.segment].decay ? p.weight_decay : 0.0f;
  for (int64_t i = t.begin + threadIdx.x; i < t.end; i += blockDim.x) {
    float mi = m[i], vi = v[i];
    const float u = adam_update(p, g[i], mi, vi);
    m[i] = mi;
    v[i] = vi;
    w[i] -= p.lr * (u + wd * w[i]);
  }
}

// LAMB, 1: moments, u = direction + wd w, and the task's f64 sums of w^2 and u^2. A skipped
// step (gate) leaves m and v unchanged and writes zero sums (every thread still joins them).
__global__ void lamb_multi_moments(const float* w, const float* g, float* m, float* v, float* update, const OptSegment* segments,
                                   const OptTask* tasks, AdamParams p, const float* gate, double* partial) {
  OptTask t = tasks[blockIdx.x];
  if (!gated(p, gate)) t.end = t.begin;
  const OptSegment& sg = segments[t.segment];
  const float wd = sg.decay ? p.weight_decay : 0.0f;
  const float* ws = w + sg.w_shift;
  double w_sq = 0.0, u_sq = 0.0;
  for (int64_t i = t.begin + threadIdx.x; i < t.end; i += blockDim.x) {
    float mi = m[i], vi = v[i];
    const float wi = ws[i];
    const float u = adam_update(p, g[i], mi, vi) + wd * wi;
    m[i] = mi;
    v[i] = vi;
    update[i] = u;
    w_sq += static_cast<double>(wi) * wi;
    u_sq += static_cast<double>(u) * u;
  }
  w_sq = block_sum_f64(w_sq);
  u_sq = block_sum_f64(u_sq);
  if (threadIdx.x == 0) {
    partial[2 * blockIdx.x] = w_sq;
    partial[2 * blockIdx.x + 1] = u_sq;
  }
}

// A segment's f64 sums of w^2 and u^2: its tasks' partial sums, in order.
__device__ __forceinline__ void segment_sums(const OptSegment& sg, const double* partial, double& w_sq, double& u_sq) {
  w_sq = 0.0;
  u_sq = 0.0;
  for (int64_t t = sg.first_task; t < sg.first_task + sg.tasks; ++t) {
    w_sq += partial[2 * t];
    u_sq += partial[2 * t + 1];
  }
}

// ||w|| / ||u||; 1 when either is 0 or the parameter does not decay (FusedLAMB without nvlamb).
__device__ __forceinline__ float trust_ratio(bool decay, double w_sq, double u_sq) {
  return decay && w_sq > 0.0 && u_sq > 0.0 ? static_cast<float>(sqrt(w_sq / u_sq)) : 1.0f;
}

// LAMB, 2: one thread per segment adds its tasks' sums in order: ratio = ||w|| / ||u||.
__global__ void lamb_multi_ratio(const OptSegment* segments, int64_t segment_count, const double* partial, float* ratio) {
  const int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (k >= segment_count) return;
  double w_sq, u_sq;
  segment_sums(segments[k], partial, w_sq, u_sq);
  ratio[k] = trust_ratio(segments[k].decay, w_sq, u_sq);
}

// Sharded LAMB, 2: one thread per parameter adds its segments' sums, segments in order (as
// Backend::lamb_shard_norms adds its pieces'); 0 for a parameter without segments here.
__global__ void lamb_param_sums(const OptSegment* segments, int64_t segment_count, const double* partial, int64_t params, double* sums) {
  const int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (k >= params) return;
  double w_sq = 0.0, u_sq = 0.0;
  for (int64_t j = 0; j < segment_count; ++j) {
    if (segments[j].param != k) continue;
    double w_j, u_j;
    segment_sums(segments[j], partial, w_j, u_j);
    w_sq += w_j;
    u_sq += u_j;
  }
  sums[2 * k] = w_sq;
  sums[2 * k + 1] = u_sq;
}

// Sharded LAMB, 3: one thread per segment, its parameter's trust ratio from the summed norms.
__global__ void lamb_param_ratio(const OptSegment* segments, int64_t segment_count, const double* sums, float* ratio) {
  const int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (k >= segment_count) return;
  const OptSegment& sg = segments[k];
  ratio[k] = trust_ratio(sg.decay, sums[2 * sg.param], sums[2 * sg.param + 1]);
}

// LAMB, 3 (sharded, 4): w -= lr * gate[lr] * ratio * u, nothing on a skipped step.
__global__ void lamb_multi_apply(float* w, const float* update, const OptSegment* segments, const OptTask* tasks, const float* ratio,
                                 float lr, const float* gate) {
  if (gate) {
    if (gate[kGateSkip] != 0.0f) return;
    lr *= gate[kGateLr];
  }
  const OptTask t = tasks[blockIdx.x];
  const float step = lr * ratio[t.segment];
  float* ws = w + segments[t.segment].w_shift;
  for (int64_t i = t.begin + threadIdx.x; i < t.end; i += blockDim.x) ws[i] -= step * update[i];
}

__global__ void axpy_kernel(float* w, const float* update, int64_t count, float step, const float* gate) {
  if (gate) {
    if (gate[kGateSkip] != 0.0f) return;
    step *= gate[kGateLr];
  }
  DLPERF_GRID_STRIDE(i, count) { w[i] -= step * update[i]; }
}

#undef DLPERF_GRID_STRIDE

unsigned one_per_thread(int64_t count) { return static_cast<unsigned>((count + kThreads - 1) / kThreads); }

unsigned reduce_grid(int64_t count) {
  const unsigned g = grid_for(count);
  return g < static_cast<unsigned>(kReduceBlocks) ? g : static_cast<unsigned>(kReduceBlocks);
}

}  // namespace

cudaError_t launch_adamw(float* w, const float* g, float* m, float* v, int64_t count, AdamParams p, const float* gate,
                         cudaStream_t s) {
  if (count == 0) return cudaSuccess;
  adamw_kernel<<<grid_for(count), kThreads, 0, s>>>(w, g, m, v, count, p, gate);
  return launched();
}

cudaError_t launch_lamb_update(const float* w, const float* g, float* m, float* v, float* update, int64_t count, AdamParams p,
                               const float* gate, double* partial, double* sums, cudaStream_t s) {
  const unsigned blocks = reduce_grid(count);
  lamb_update_kernel<<<blocks, kThreads, 0, s>>>(w, g, m, v, update, count, p, gate, partial);
  finish_sums<<<1, kThreads, 0, s>>>(partial, static_cast<int>(blocks), sums);
  return launched();
}

cudaError_t launch_axpy(float* w, const float* update, int64_t count, float step, const float* gate, cudaStream_t s) {
  if (count == 0) return cudaSuccess;
  axpy_kernel<<<grid_for(count), kThreads, 0, s>>>(w, update, count, step, gate);
  return launched();
}

cudaError_t launch_adamw_multi(float* w, const float* g, float* m, float* v, const OptSegment* segments, const OptTask* tasks,
                               int64_t task_count, AdamParams p, const float* gate, cudaStream_t s) {
  if (task_count == 0) return cudaSuccess;
  adamw_multi_kernel<<<static_cast<unsigned>(task_count), kThreads, 0, s>>>(w, g, m, v, segments, tasks, p, gate);
  return launched();
}

cudaError_t launch_lamb_multi(float* w, const float* g, float* m, float* v, float* update, const OptSegment* segments,
                              int64_t segment_count, const OptTask* tasks, int64_t task_count, AdamParams p, const float* gate,
                              double* partial, float* ratio, cudaStream_t s) {
  if (task_count == 0) return cudaSuccess;
  const auto blocks = static_cast<unsigned>(task_count);
  lamb_multi_moments<<<blocks, kThreads, 0, s>>>(w, g, m, v, update, segments, tasks, p, gate, partial);
  lamb_multi_ratio<<<one_per_thread(segment_count), kThreads, 0, s>>>(segments, segment_count, partial, ratio);
  lamb_multi_apply<<<blocks, kThreads, 0, s>>>(w, update, segments, tasks, ratio, p.lr, gate);
  return launched();
}

cudaError_t launch_lamb_shard_norms(const float* w, const float* g, float* m, float* v, float* update, const OptSegment* segments,
                                    int64_t segment_count, const OptTask* tasks, int64_t task_count, int64_t params, AdamParams p,
                                    const float* gate, double* partial, double* sums, cudaStream_t s) {
  if (params == 0) return cudaSuccess;
  // A rank whose shard holds nothing still writes its zeros: every rank joins the sum.
  if (task_count > 0) lamb_multi_moments<<<static_cast<unsigned>(task_count), kThreads, 0, s>>>(w, g, m, v, update, segments, tasks, p, gate, partial);
  lamb_param_sums<<<one_per_thread(params), kThreads, 0, s>>>(segments, segment_count, partial, params, sums);
  return launched();
}

cudaError_t launch_lamb_shard_apply(float* w, const float* update, const OptSegment* segments, int64_t segment_count, const OptTask* tasks,
                                    int64_t task_count, const double* sums, float* ratio, float lr, const float* gate, cudaStream_t s) {
  if (task_count == 0) return cudaSuccess;
  lamb_param_ratio<<<one_per_thread(segment_count), kThreads, 0, s>>>(segments, segment_count, sums, ratio);
  lamb_multi_apply<<<static_cast<unsigned>(task_count), kThreads, 0, s>>>(w, update, segments, tasks, ratio, lr, gate);
  return launched();
}

cudaError_t launch_sum_squares(const float* x, int64_t count, double* partial, double* sums, cudaStream_t s) {
  const unsigned blocks = reduce_grid(count);
  sum_squares_kernel<<<blocks, kThreads, 0, s>>>(x, count, partial);
  finish_sums<<<1, kThreads, 0, s>>>(partial, static_cast<int>(blocks), sums);
  return launched();
}

void list_kernels_optimizer(std::vector<KernelLaunch>& out) {
  out.push_back(launch_entry("sgd_kernel", &sgd_kernel, kThreads));
  out.push_back(launch_entry("sgd_multi_kernel", &sgd_multi_kernel, kThreads));
  out.push_back(launch_entry("adamw_kernel", &adamw_kernel, kThreads));
  out.push_back(launch_entry("lamb_update_kernel", &lamb_update_kernel, kThreads));
  out.push_back(launch_entry("sum_squares_kernel", &sum_squares_kernel, kThreads));
  out.push_back(launch_entry("finish_sums", &finish_sums, kThreads));
  out.push_back(launch_entry("adamw_multi_kernel", &adamw_multi_kernel, kThreads));
  out.push_back(launch_entry("lamb_multi_moments", &lamb_multi_moments, kThreads));
  out.push_back(launch_entry("lamb_multi_ratio", &lamb_multi_ratio, kThreads));
  out.push_back(launch_entry("lamb_multi_apply", &lamb_multi_apply, kThreads));
  out.push_back(launch_entry("lamb_param_sums", &lamb_param_sums, kThreads));
  out.push_back(launch_entry("lamb_param_ratio", &lamb_param_ratio, kThreads));
  out.push_back(launch_entry("axpy_kernel", &axpy_kernel, kThreads));
}

}  // namespace dlperf::cuda
