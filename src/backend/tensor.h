// Tensors: logical dims owned by dlperf, storage and layout owned by a backend.
// A backend may store a tensor in a blocked layout (oneDNN nChw16c, cuDNN NHWC); the
// canonical layout used to move data in and out (init, tests, fixtures) is dense row-major
// over dims(): (N, C, H, W) for images, (rows, cols) for matrices.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace dlperf {

enum class DType : uint8_t { f32, bf16, f16, s32 };
size_t dtype_size(DType t);
const char* to_string(DType t);

using Dims = std::vector<int64_t>;
int64_t product(const Dims& d);
std::string to_string(const Dims& d);  // "(32, 3, 224, 224)"

class Tensor {
 public:
  virtual ~Tensor() = default;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  const Dims& dims() const { return dims_; }
  DType dtype() const { return dtype_; }
  int64_t numel() const { return product(dims_); }

  virtual size_t storage_bytes() const = 0;  // backend storage, padding included
  // Canonical dense layout, converted from/to f32 (s32 tensors: exact for |v| < 2^24).
  virtual void read(std::span<float> out) const = 0;
  virtual void write(std::span<const float> in) = 0;
  virtual void write_indices(std::span<const int32_t> in) = 0;  // s32 tensors (labels, token ids)
  // Copies `bytes` already in this tensor's storage format (its dtype, dense canonical or
  // channels-last order: a tensor made by Backend::tensor) from host memory or, on CUDA, from
  // device memory: an input loaded without conversion. bytes must equal storage_bytes().
  virtual void write_bytes(const void* src, size_t bytes) = 0;
  virtual void zero() = 0;
  // Same dims, dtype and storage layout: the two can be used interchangeably by planned ops.
  virtual bool same_layout(const Tensor& other) const = 0;

 protected:
  Tensor(Dims dims, DType dtype) : dims_(std::move(dims)), dtype_(dtype) {}

 private:
  Dims dims_;
  DType dtype_;
};
using TensorPtr = std::unique_ptr<Tensor>;

}  // namespace dlperf
