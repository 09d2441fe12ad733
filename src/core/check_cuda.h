// StatusTraits for cudaError_t, so CUDA runtime calls go through the one checking mechanism:
//   DLPERF_CHECK(cudaEventRecord(ev, stream));
// Shared by the NCCL communicator and the CUDA backend; empty in a build without CUDA.
#pragma once

#if defined(DLPERF_WITH_CUDA)
#include <cuda_runtime_api.h>

#include <string>

#include "core/check.h"

namespace dlperf {

template <>
struct StatusTraits<cudaError_t> {
  static constexpr const char* library = "CUDA";
  static bool ok(cudaError_t s) { return s == cudaSuccess; }
  static bool out_of_memory(cudaError_t s) {
    if (s != cudaErrorMemoryAllocation) return false;
    cudaGetLastError();  // not sticky: clear it, or the next kernel launch check would report it
    return true;
  }
  static std::string describe(cudaError_t s) { return std::string(cudaGetErrorName(s)) + ": " + cudaGetErrorString(s); }
};

}  // namespace dlperf
#endif
