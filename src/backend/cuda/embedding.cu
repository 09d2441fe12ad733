// Embedding lookup / row gather and their gradient.
//
// Forward gathers rows. Backward is a deterministic scatter-add, linear in the number of rows:
//   1. keys = ids (out-of-range ids to one sentinel key past the table), values = positions;
//      cub's radix sort by key (stable: equal ids keep position order), over only the bits the
//      table size needs;
//   2. the sorted rows are cut into chunks of kChunk; a block per chunk adds each run of equal
//      ids inside it, in position order, into one f32 partial row (at the run's first index);
//   3. a block per run head (the first sorted index of an id) adds its run's partial rows
//      chunk by chunk, in order, into the output row (zeroed first, or added to for a tied
//      table). A long run (the two token types, the 128 positions of a batch) is split over
//      many chunk blocks rather than one block walking thousands of rows.
// Every sum has a fixed order: bit-reproducible, no atomics.
#include <cub/device/device_radix_sort.cuh>

#include "backend/cuda/common.cuh"

namespace dlperf::cuda {
namespace {

constexpr int64_t kChunk = 32;  // sorted rows per partial-sum block

// A block per row (looping): the row's id is read once, and no 64-bit `/` or `%` per element.
template <class T>
__global__ void embedding_fwd(const int32_t* ids, const T* w, T* y, int64_t rows, int64_t vocab, int cols) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int32_t id = ids[r];
    const bool ok = id >= 0 && id < vocab;
    const T* src = w + (ok ? int64_t{id} * cols : 0);
    T* dst = y + r * cols;
    for (int c = static_cast<int>(threadIdx.x); c < cols; c += static_cast<int>(blockDim.x)) store(dst, c, ok ? load(src, c) : 0.0f);
  }
}

__global__ void sort_inputs(const int32_t* ids, int64_t rows, int32_t out_rows, int32_t* keys, int32_t* positions) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows; i += int64_t{gridDim.x} * blockDim.x) {
    const int32_t id = ids[i];
    keys[i] = id >= 0 && id < out_rows ? id : out_rows;  // the sentinel sorts last and is skipped
    positions[i] = static_cast<int32_t>(i);
  }
}

// partial[run start] = sum over the run's rows inside the chunk of dy[position], per chunk of
// kChunk sorted rows (blocks walk the chunks).
template <class T>
__global__ void chunk_sums(const int32_t* keys, const int32_t* positions, const T* dy, int64_t rows, int64_t cols, float* partial) {
  __shared__ int32_t k[kChunk];
  __shared__ int32_t pos[kChunk];
  for (int64_t begin = blockIdx.x * kChunk; begin < rows; begin += int64_t{gridDim.x} * kChunk) {
    const int64_t n = rows - begin < kChunk ? rows - begin : kChunk;
    __syncthreads();  // the previous chunk's readers are done
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      k[i] = keys[begin + i];
      pos[i] = positions[begin + i];
    }
    __syncthreads();
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      float acc = 0.0f;
      int64_t start = 0;
      for (int64_t i = 0; i < n; ++i) {
        if (i > 0 && k[i] != k[i - 1]) {
          partial[(begin + start) * cols + c] = acc;
          acc = 0.0f;
          start = i;
        }
        acc += load(dy, static_cast<int64_t>(pos[i]) * cols + c);
      }
      partial[(begin + start) * cols + c] = acc;
    }
  }
}

// Blocks walk the sorted indices; the heads of runs add the run's partials chunk by chunk.
template <class D>
__global__ void run_totals(const int32_t* keys, const float* partial, int64_t rows, int64_t out_rows, int64_t cols, D* out, bool accumulate) {
  for (int64_t i = blockIdx.x; i < rows; i += gridDim.x) {
    const int32_t id = keys[i];
    if (id >= out_rows || (i > 0 && keys[i - 1] == id)) continue;  // uniform across the block
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      float acc = accumulate ? load(out, id * cols + c) : 0.0f;
      acc += partial[i * cols + c];  // the run's part in its first chunk
      for (int64_t b = (i / kChunk + 1) * kChunk; b < rows && keys[b] == id; b += kChunk) acc += partial[b * cols + c];
      store(out, id * cols + c, acc);
    }
  }
}

int key_bits(int64_t out_rows) {  // bits of the largest key, the sentinel out_rows
  int bits = 1;
  while (bits < 31 && (int64_t{1} << bits) <= out_rows) ++bits;
  return bits;
}

}  // namespace

unsigned scatter_rows_chunk_grid(int64_t rows) { return rows_grid((rows + kChunk - 1) / kChunk); }

size_t scatter_rows_scratch_bytes(int64_t rows, int64_t cols, int64_t out_rows) {
  size_t sort_bytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
                                  static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), static_cast<int>(rows), 0,
                                  key_bits(out_rows));
  auto up = [](size_t b) { return (b + 255) / 256 * 256; };
  return 4 * up(static_cast<size_t>(rows) * sizeof(int32_t)) + up(static_cast<size_t>(rows * cols) * sizeof(float)) + up(sort_bytes);
}

cudaError_t launch_embedding_forward(const int32_t* ids, const void* w, void* y, ElemType t, int64_t rows, int64_t vocab,
                                     int64_t cols, cudaStream_t s) {
  const int64_t count = rows * cols;
  if (count == 0) return cudaSuccess;
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    embedding_fwd<<<rows_grid(rows), kThreads, 0, s>>>(ids, static_cast<const T*>(w), static_cast<T*>(y), rows, vocab, static_cast<int>(cols));
    return launched();
  });
}

cudaError_t launch_scatter_rows(const int32_t* ids, const void* dy, ElemType t, void* out, ElemType out_type, int64_t rows,
                                int64_t out_rows, int64_t cols, bool accumulate, void* scratch, cudaStream_t s) {
  if (!accumulate) {
    const size_t elem_bytes = out_type == ElemType::f32 ? 4 : 2;
    const cudaError_t e = cudaMemsetAsync(out, 0, static_cast<size_t>(out_rows * cols) * elem_bytes, s);
    if (e != cudaSuccess) return e;
  }
  if (rows == 0) return cudaSuccess;
  if (rows > INT32_MAX || out_rows >= INT32_MAX) return cudaErrorInvalidValue;
  auto up = [](size_t b) { return (b + 255) / 256 * 256; };
  char* p = static_cast<char*>(scratch);
  const size_t ints = up(static_cast<size_t>(rows) * sizeof(int32_t));
  auto* keys_in = reinterpret_cast<int32_t*>(p);
  auto* keys = reinterpret_cast<int32_t*>(p + ints);
  auto* pos_in = reinterpret_cast<int32_t*>(p + 2 * ints);
  auto* pos = reinterpret_cast<int32_t*>(p + 3 * ints);
  auto* partial = reinterpret_cast<float*>(p + 4 * ints);
  void* sort_tmp = p + 4 * ints + up(static_cast<size_t>(rows * cols) * sizeof(float));
  const int bits = key_bits(out_rows);
  size_t sort_bytes = 0;
  cudaError_t e = cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, keys_in, keys, pos_in, pos, static_cast<int>(rows), 0, bits, s);
  if (e != cudaSuccess) return e;
  sort_inputs<<<grid_for(rows), kThreads, 0, s>>>(ids, rows, static_cast<int32_t>(out_rows), keys_in, pos_in);
  e = cub::DeviceRadixSort::SortPairs(sort_tmp, sort_bytes, keys_in, keys, pos_in, pos, static_cast<int>(rows), 0, bits, s);
  if (e != cudaSuccess) return e;
  const unsigned chunks = scatter_rows_chunk_grid(rows);
  return dispatch_float(t, [&](auto tag) {
    using T = decltype(tag);
    chunk_sums<<<chunks, kThreads, 0, s>>>(keys, pos, static_cast<const T*>(dy), rows, cols, partial);
    return dispatch_float(out_type, [&](auto out_tag) {
      using D = decltype(out_tag);
      run_totals<<<rows_grid(rows), kThreads, 0, s>>>(keys, partial, rows, out_rows, cols, static_cast<D*>(out), accumulate);
      return launched();
    });
  });
}

void list_kernels_embedding(std::vector<KernelLaunch>& out) {
  DLPERF_LIST_FLOAT(out, embedding_fwd, kThreads);
  DLPERF_LIST_FLOAT(out, chunk_sums, kThreads);
  DLPERF_LIST_FLOAT(out, run_totals, kThreads);
  out.push_back(launch_entry("sort_inputs", &sort_inputs, kThreads));
}

}  // namespace dlperf::cuda
