// RAII for every CUDA, cuDNN and cuBLAS object the backend owns: the stream, library
// handles, descriptors and device allocations. Constructors check through DLPERF_CHECK;
// destructors never throw and ignore failures (the context may already be broken).
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "backend/cuda/check.h"

namespace dlperf::cuda {

// A handle type with a create and a destroy function: one template for the cuDNN descriptors
// and library handles, so each is owned the same way.
template <class H, auto Create, auto Destroy>
class Handle {
 public:
  Handle() { DLPERF_CHECK(Create(&h_)); }
  ~Handle() {
    if (h_) Destroy(h_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  Handle& operator=(Handle&& o) noexcept {
    std::swap(h_, o.h_);
    return *this;
  }
  H get() const { return h_; }
  operator H() const { return h_; }  // NOLINT: passed straight to library calls

 private:
  H h_ = nullptr;
};

using CudnnHandle = Handle<cudnnHandle_t, cudnnCreate, cudnnDestroy>;
using CublasHandle = Handle<cublasHandle_t, cublasCreate, cublasDestroy>;
using CublasLtHandle = Handle<cublasLtHandle_t, cublasLtCreate, cublasLtDestroy>;
using TensorDesc = Handle<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDesc = Handle<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvDesc = Handle<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor>;
using PoolDesc = Handle<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor, cudnnDestroyPoolingDescriptor>;
using ActivationDesc = Handle<cudnnActivationDescriptor_t, cudnnCreateActivationDescriptor, cudnnDestroyActivationDescriptor>;

// The backend's one compute stream. Non-blocking: it never synchronises with the legacy
// default stream, so the NCCL communicator's stream and host copies order only by events.
class Stream {
 public:
  Stream() { DLPERF_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  ~Stream() {
    if (s_) cudaStreamDestroy(s_);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

// A CUDA event. Timing events measure (StepRecorder marks); ordering-only events are
// cheaper to record and are what the streams wait on.
class Event {
 public:
  enum Kind { timing, ordering };
  explicit Event(Kind k = ordering) {
    DLPERF_CHECK(cudaEventCreateWithFlags(&e_, k == timing ? cudaEventDefault : cudaEventDisableTiming));
  }
  ~Event() {
    if (e_) cudaEventDestroy(e_);
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  Event(Event&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
  Event& operator=(Event&& o) noexcept {
    std::swap(e_, o.e_);
    return *this;
  }
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

// Page-locked host memory: the only host memory asynchronous copies truly overlap with.
class PinnedMemory {
 public:
  PinnedMemory() = default;
  explicit PinnedMemory(size_t bytes) : bytes_(bytes) {
    if (bytes_ > 0) DLPERF_CHECK(cudaHostAlloc(&p_, bytes_, cudaHostAllocDefault));
  }
  ~PinnedMemory() {
    if (p_) cudaFreeHost(p_);
  }
  PinnedMemory(const PinnedMemory&) = delete;
  PinnedMemory& operator=(const PinnedMemory&) = delete;
  PinnedMemory(PinnedMemory&& o) noexcept : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  PinnedMemory& operator=(PinnedMemory&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  void* get() const { return p_; }
  template <class T>
  T* as() const { return static_cast<T*>(p_); }
  size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// Current and peak bytes of the backend's own device allocations (peak_memory_bytes()).
struct MemoryCounter {
  std::atomic<int64_t> current{0};
  std::atomic<int64_t> peak{0};
  void add(int64_t bytes) {
    const int64_t now = current.fetch_add(bytes) + bytes;
    int64_t p = peak.load();
    while (now > p && !peak.compare_exchange_weak(p, now)) {
    }
  }
  void sub(int64_t bytes) { current.fetch_sub(bytes); }
};

// One device allocation, counted in a MemoryCounter that must outlive it (the Context owns
// the counter; every tensor, buffer and op holds the Context).
class DeviceMemory {
 public:
  DeviceMemory() = default;
  DeviceMemory(size_t bytes, MemoryCounter& counter) : bytes_(bytes), counter_(&counter) {
    if (bytes_ > 0) DLPERF_CHECK(cudaMalloc(&p_, bytes_));
    counter_->add(static_cast<int64_t>(bytes_));
  }
  ~DeviceMemory() { release(); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  DeviceMemory(DeviceMemory&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)), counter_(std::exchange(o.counter_, nullptr)) {}
  DeviceMemory& operator=(DeviceMemory&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
      counter_ = std::exchange(o.counter_, nullptr);
    }
    return *this;
  }
  void* get() const { return p_; }
  template <class T>
  T* as() const { return static_cast<T*>(p_); }
  size_t bytes() const { return bytes_; }

 private:
  void release() {
    if (p_) cudaFree(p_);
    if (counter_) counter_->sub(static_cast<int64_t>(bytes_));
    p_ = nullptr;
    bytes_ = 0;
    counter_ = nullptr;
  }
  void* p_ = nullptr;
  size_t bytes_ = 0;
  MemoryCounter* counter_ = nullptr;
};

}  // namespace dlperf::cuda
