// Layer normalisation over the last dimension, x (rows, cols), alone or fused with the dropout
// and residual add in front of it (BERT's sublayer outputs):
//   forward   s = r + dropout(a)  (or s = x)            one launch
//             y = (s - mean) * rstd * gamma + beta,  rstd = 1 / sqrt(var + eps), var biased
//   backward  (xhat = (s - mean) * rstd, g = dy * gamma)  one launch
//             ds = rstd * (g - mean(g) - xhat * mean(g * xhat))   -> dr (= ds), da = mask * ds / (1 - p)
//             dgamma = sum_rows dy * xhat,  dbeta = sum_rows dy
// A block walks rows (row = blockIdx.x, += gridDim.x); each thread owns the columns
// threadIdx.x + k * blockDim.x (k < kPer) and keeps their dgamma / dbeta partials in
// registers across its rows; the block writes them to `partial` and the last block to finish
// (a ticket counter) adds the blocks' partials in block order: deterministic, no second launch.
// The dropout mask is the Dropout op's (dropout_keep over the (rows, cols) element index), so
// the fused op equals Dropout + Add + LayerNorm with the same seed and call counter.
#include <type_traits>

#include "backend/cuda/common.cuh"

namespace dlperf::cuda {
namespace {

// Columns per thread (kPer) and threads per block (kThreads) are compile-time, so the per-column
// arrays hold exactly what a launch uses (the review measured 155 registers when they were sized
// for 16 columns at every width) and __launch_bounds__ tells ptxas the block size it must fit:
//   cols <= 1,024   4 x 256     (BERT base / large)
//   cols <= 2,048   8 x 256
//   cols <= 4,096  16 x 256
//   cols <= 16,384 16 x 1,024  (at most 64 registers a thread: backward keeps its dgamma/dbeta
//                               partials in the block's `partial` row instead of registers)
// Column indices are 32-bit (cols <= 16,384); only row * cols needs 64 bits.
template <class T, int kPer, int kThreads>
__global__ void __launch_bounds__(kThreads) add_norm_fwd(AddNormForward f) {
  const T* a = static_cast<const T*>(f.a);
  const T* r = static_cast<const T*>(f.r);
  T* s = static_cast<T*>(f.s);
  T* y = static_cast<T*>(f.y);
  const int cols = static_cast<int>(f.cols);
  const int tid = static_cast<int>(threadIdx.x);
  const uint64_t key = f.p > 0.0f ? dropout_key(f.seed, *f.mask_counter) : 0;
  for (int64_t row = blockIdx.x; row < f.rows; row += gridDim.x) {
    const int64_t base = row * cols;
    float v[kPer];
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int j = tid + k * kThreads;
      v[k] = 0.0f;
      if (j < cols) {
        const int64_t i = base + j;
        float x = load(a, i);
        if (f.p > 0.0f) x = dropout_keep(key, i, f.p) ? x * f.scale : 0.0f;
        if (r) x += load(r, i);
        if (s) {
          x = rounded<T>(x);  // backward normalises the stored s: use what is stored
          store(s, i, x);
        }
        v[k] = x;
        sum += x;
      }
    }
    const float mu = block_sum(sum) / static_cast<float>(cols);
    float sq = 0.0f;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int j = tid + k * kThreads;
      if (j < cols) sq += (v[k] - mu) * (v[k] - mu);
    }
    const float rs = rsqrtf(block_sum(sq) / static_cast<float>(cols) + f.eps);
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int j = tid + k * kThreads;
      if (j < cols) store(y, base + j, (v[k] - mu) * rs * f.gamma[j] + f.beta[j]);
    }
    if (tid == 0) {
      f.mean[row] = mu;
      f.rstd[row] = rs;
    }
  }
}

template <class T, int kPer, int kThreads>
__global__ void __launch_bounds__(kThreads) add_norm_bwd(AddNormBackward b) {
  // 256-thread blocks keep a row's xhat and dy and the dgamma / dbeta partials in registers.
  // 1,024-thread blocks (64 registers a thread, or they spill) re-read x and dy for the second
  // pass (L1/L2 hits: the block just read that row) and accumulate the partials in this block's
  // own rows of `partial`, which only this thread touches for its columns.
  constexpr bool kRegPartials = kThreads <= 256;
  constexpr int kPg = kRegPartials ? kPer : 1;
  const T* x = static_cast<const T*>(b.x);
  const T* dy = static_cast<const T*>(b.dy);
  T* dx = static_cast<T*>(b.dx);
  T* da = static_cast<T*>(b.da);
  const int cols = static_cast<int>(b.cols);
  const int tid = static_cast<int>(threadIdx.x);
  const float inv = 1.0f / static_cast<float>(cols);
  float* my_pg = b.partial + (2 * int64_t{blockIdx.x}) * cols;  // (cols) this block's dgamma partials
  float* my_pb = my_pg + cols;                                   // (cols) this block's dbeta partials
  float pg[kPg], pb[kPg];
#pragma unroll
  for (int k = 0; k < kPg; ++k) pg[k] = pb[k] = 0.0f;
  if constexpr (!kRegPartials) {
    for (int j = tid; j < cols; j += kThreads) my_pg[j] = my_pb[j] = 0.0f;
  }
  for (int64_t row = blockIdx.x; row < b.rows; row += gridDim.x) {
    const int64_t base = row * cols;
    const float mu = b.mean[row], rs = b.rstd[row];
    float xh[kPg], d[kPg];
    float sg = 0.0f, sgx = 0.0f;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int j = tid + k * kThreads;
      if (j < cols) {
        const int64_t i = base + j;
        const float xk = (load(x, i) - mu) * rs, dk = load(dy, i);
        const float g = dk * b.gamma[j];
        sg += g;
        sgx += g * xk;
        if constexpr (kRegPartials) {
          xh[k] = xk;
          d[k] = dk;
          pg[k] += dk * xk;
          pb[k] += dk;
        } else {
          my_pg[j] += dk * xk;
          my_pb[j] += dk;
        }
      }
    }
    const float mg = block_sum(sg) * inv, mgx = block_sum(sgx) * inv;
    // Read here, not once per kernel: live through the whole row, the key spills the
    // 1,024-thread variants' registers.
    const uint64_t key = da && b.p > 0.0f ? dropout_key(b.seed, *b.mask_counter) : 0;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int j = tid + k * kThreads;
      if (j < cols) {
        const int64_t i = base + j;
        float xk, dk;
        if constexpr (kRegPartials) {
          xk = xh[k];
          dk = d[k];
        } else {
          xk = (load(x, i) - mu) * rs;
          dk = load(dy, i);
        }
        const float ds = rs * (dk * b.gamma[j] - mg - xk * mgx);
        if (dx) store(dx, i, ds);
        if (da) store(da, i, b.p > 0.0f ? (dropout_keep(key, i, b.p) ? ds * b.scale : 0.0f) : ds);
      }
    }
  }
  // Parameter gradients: this block's partials, then the last block adds all in block order.
  if constexpr (kRegPartials) {
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int j = tid + k * kThreads;
      if (j < cols) {
        my_pg[j] = pg[k];
        my_pb[j] = pb[k];
      }
    }
  }
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (tid == 0) {
    last = atomicAdd(b.counter, 1) == static_cast<int>(gridDim.x) - 1;
    if (last) *b.counter = 0;
  }
  __syncthreads();
  if (!last) return;
  for (int j = tid; j < cols; j += kThreads) {
    float tg = 0.0f, tb = 0.0f;
    for (unsigned blk = 0; blk < gridDim.x; ++blk) {
      tg += __ldcg(&b.partial[(2 * int64_t{blk}) * cols + j]);
      tb += __ldcg(&b.partial[(2 * int64_t{blk} + 1) * cols + j]);
    }
    b.dgamma[j] = tg;
    b.dbeta[j] = tb;
  }
}

// Calls f(std::integral_constant<int, kPer>, std::integral_constant<int, kThreads>) for g's shape.
template <class F>
cudaError_t dispatch_shape(AddNormGrid g, F&& f) {
  using std::integral_constant;
  if (g.threads == 256 && g.per_thread == 4) return f(integral_constant<int, 4>{}, integral_constant<int, 256>{});
  if (g.threads == 256 && g.per_thread == 8) return f(integral_constant<int, 8>{}, integral_constant<int, 256>{});
  if (g.threads == 256 && g.per_thread == 16) return f(integral_constant<int, 16>{}, integral_constant<int, 256>{});
  if (g.threads == 1024 && g.per_thread == 16) return f(integral_constant<int, 16>{}, integral_constant<int, 1024>{});
  return cudaErrorInvalidValue;
}

}  // namespace

AddNormGrid add_norm_grid(int64_t rows, int64_t cols, int sm_count) {
  AddNormGrid g;
  g.threads = cols <= 4096 ? 256 : 1024;
  g.per_thread = cols <= 1024 ? 4 : cols <= 2048 ? 8 : 16;
  g.supported = cols <= int64_t{g.per_thread} * g.threads && cols > 0;
  const int64_t want = 4 * static_cast<int64_t>(sm_count > 0 ? sm_count : 1);
  g.blocks = static_cast<unsigned>(rows < want ? (rows > 0 ? rows : 1) : want);  // gridDim.x: far below 2^31
  return g;
}

cudaError_t launch_add_norm_forward(const AddNormForward& f, ElemType t, AddNormGrid g, cudaStream_t s) {
  if (f.rows == 0) return cudaSuccess;
  if (!g.supported) return cudaErrorInvalidValue;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    return dispatch_shape(g, [&](auto per, auto threads) {
      add_norm_fwd<T, per(), threads()><<<g.blocks, threads(), 0, s>>>(f);
      return launched();
    });
  });
}

cudaError_t launch_add_norm_backward(const AddNormBackward& b, ElemType t, AddNormGrid g, cudaStream_t s) {
  if (b.rows == 0) return cudaSuccess;
  if (!g.supported) return cudaErrorInvalidValue;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    return dispatch_shape(g, [&](auto per, auto threads) {
      add_norm_bwd<T, per(), threads()><<<g.blocks, threads(), 0, s>>>(b);
      return launched();
    });
  });
}

void list_kernels_layer_norm(std::vector<KernelLaunch>& out) {
  auto both = [&](auto per, auto threads, const char* shape) {
    const std::string s = std::string(", ") + shape + ">";
    out.push_back(launch_entry("add_norm_fwd<f32" + s, &add_norm_fwd<float, per(), threads()>, threads()));
    out.push_back(launch_entry("add_norm_fwd<f16" + s, &add_norm_fwd<__half, per(), threads()>, threads()));
    out.push_back(launch_entry("add_norm_fwd<bf16" + s, &add_norm_fwd<__nv_bfloat16, per(), threads()>, threads()));
    out.push_back(launch_entry("add_norm_bwd<f32" + s, &add_norm_bwd<float, per(), threads()>, threads()));
    out.push_back(launch_entry("add_norm_bwd<f16" + s, &add_norm_bwd<__half, per(), threads()>, threads()));
    out.push_back(launch_entry("add_norm_bwd<bf16" + s, &add_norm_bwd<__nv_bfloat16, per(), threads()>, threads()));
  };
  using std::integral_constant;
  both(integral_constant<int, 4>{}, integral_constant<int, 256>{}, "4 x 256");
  both(integral_constant<int, 8>{}, integral_constant<int, 256>{}, "8 x 256");
  both(integral_constant<int, 16>{}, integral_constant<int, 256>{}, "16 x 256");
  both(integral_constant<int, 16>{}, integral_constant<int, 1024>{}, "16 x 1024");
}

}  // namespace dlperf::cuda
