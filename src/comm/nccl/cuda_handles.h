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
  enum Kind { ordering, timing };
  // ordering: timing off, for events that only order streams and signal completion (cheaper);
  // timing: for events whose elapsed times are read (a request's GPU begin and end).
  explicit CudaEvent(Kind k = ordering) {
    DLPERF_CHECK(cudaEventCreateWithFlags(&e_, k == timing ? cudaEventDefault : cudaEventDisableTiming));
  }
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

// Page-locked host memory (cudaHostAlloc): what asynchronous copies overlap with.
template <class T>
class PinnedHostBuffer {
 public:
  explicit PinnedHostBuffer(size_t count) : count_(count) {
    if (count_ > 0) DLPERF_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&p_), count_ * sizeof(T), cudaHostAllocDefault));
  }
  ~PinnedHostBuffer() {
    if (p_) cudaFreeHost(p_);
  }
  PinnedHostBuffer(const PinnedHostBuffer&) = delete;
  PinnedHostBuffer& operator=(const PinnedHostBuffer&) = delete;
  T* get() const { return p_; }
  size_t count() const { return count_; }

 private:
  T* p_ = nullptr;
  size_t count_ = 0;
};

}  // namespace dlperf
