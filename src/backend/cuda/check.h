// StatusTraits for cuDNN and cuBLAS status codes, so every library call in the CUDA backend
// goes through the one checking mechanism (core/check.h):
//   DLPERF_CHECK(cudnnConvolutionForward(...));
//   DLPERF_CHECK(cublasGemmStridedBatchedEx(...));
// cudaError_t's traits live in core/check_cuda.h (shared with the NCCL communicator).
#pragma once

#include <cublas_v2.h>
#include <cudnn.h>

#include <string>

#include "core/check.h"
#include "core/check_cuda.h"

namespace dlperf {

template <>
struct StatusTraits<cudnnStatus_t> {
  static constexpr const char* library = "cuDNN";
  static bool ok(cudnnStatus_t s) { return s == CUDNN_STATUS_SUCCESS; }
  static bool out_of_memory(cudnnStatus_t s) { return s == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED; }
  static std::string describe(cudnnStatus_t s) { return cudnnGetErrorString(s); }
};

template <>
struct StatusTraits<cublasStatus_t> {
  static constexpr const char* library = "cuBLAS";
  static bool ok(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS; }
  static bool out_of_memory(cublasStatus_t s) { return s == CUBLAS_STATUS_ALLOC_FAILED; }
  static std::string describe(cublasStatus_t s) { return std::string(cublasGetStatusName(s)) + ": " + cublasGetStatusString(s); }
};

}  // namespace dlperf
