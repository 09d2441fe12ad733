// RAII for the CUDA objects the NCCL communicator owns: a stream, an event, a device buffer.
// Destructors never throw; failures there are ignored (the context may already be broken).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "core/check_cuda.h"

namespace dlperf {

class CudaStream {
 public:
  CudaStream() { DLPERF_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  ~CudaStream() {
    if (s_) cudaStreamDestroy(s_);
  }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

class CudaEvent {
 public:
  // Timing off: these events only order streams and signal completion, which is cheaper.
  CudaEvent() { DLPERF_CHECK(cudaEventCreateWithFlags(&e_, cudaEventDisableTiming)); }
  ~CudaEvent() {
    if (e_) cudaEventDestroy(e_);
  }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t count) : count_(count) {
    if (count_ > 0) DLPERF_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), count_ * sizeof(T)));
  }
  ~DeviceBuffer() {
    if (p_) cudaFree(p_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return p_; }
  size_t count() const { return count_; }

 private:
  T* p_ = nullptr;
  size_t count_ = 0;
};

}  // namespace dlperf
