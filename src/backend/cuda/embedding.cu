// Embedding lookup / row gather and their gradient. Forward gathers rows. Backward scatters
// without atomics, so it is bit-reproducible: the output is zeroed (unless accumulating, for
// tied weights), then for each distinct id the block of its first occurrence adds all of that
// id's dy rows in position order. Cost O(rows^2) id comparisons: trivial for the token counts of a step
// (BERT: 16 x 128 = 2048 rows).
#include "backend/cuda/common.cuh"

namespace dlperf::cuda {
namespace {

template <class T>
__global__ void embedding_fwd(const int32_t* ids, const T* w, T* y, int64_t count, int64_t vocab, int64_t cols) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / cols, c = i % cols;
    const int32_t id = ids[r];
    store(y, i, id >= 0 && id < vocab ? load(w, id * cols + c) : 0.0f);
  }
}

template <class T, class D>
__global__ void scatter_rows(const int32_t* ids, const T* dy, D* out, int64_t rows, int64_t out_rows, int64_t cols, bool accumulate) {
  const int64_t r = blockIdx.x;
  const int32_t id = ids[r];
  if (id < 0 || id >= out_rows) return;
  int seen = 0;
  for (int64_t j = threadIdx.x; j < r; j += blockDim.x) seen |= ids[j] == id;
  if (__syncthreads_or(seen)) return;  // an earlier row with this id owns the sum
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float acc = accumulate ? load(out, id * cols + c) : 0.0f;
    for (int64_t j = r; j < rows; ++j)
      if (ids[j] == id) acc += load(dy, j * cols + c);
    store(out, id * cols + c, acc);
  }
}

}  // namespace

cudaError_t launch_embedding_forward(const int32_t* ids, const void* w, void* y, ElemType t, int64_t rows, int64_t vocab,
                                     int64_t cols, cudaStream_t s) {
  const int64_t count = rows * cols;
  if (count == 0) return cudaSuccess;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    embedding_fwd<<<grid_for(count), kThreads, 0, s>>>(ids, static_cast<const T*>(w), static_cast<T*>(y), count, vocab, cols);
    return launched();
  });
}

cudaError_t launch_scatter_rows(const int32_t* ids, const void* dy, ElemType t, void* out, ElemType out_type, int64_t rows,
                                int64_t out_rows, int64_t cols, bool accumulate, cudaStream_t s) {
  if (!accumulate) {
    const size_t elem_bytes = out_type == ElemType::f32 ? 4 : 2;
    const cudaError_t e = cudaMemsetAsync(out, 0, static_cast<size_t>(out_rows * cols) * elem_bytes, s);
    if (e != cudaSuccess) return e;
  }
  if (rows == 0) return cudaSuccess;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    return dispatch_float(out_type, [&](auto out_tag) {
      using D = decltype(out_tag);
      scatter_rows<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(ids, static_cast<const T*>(dy), static_cast<D*>(out), rows, out_rows,
                                                                    cols, accumulate);
      return launched();
    });
  });
}

}  // namespace dlperf::cuda
