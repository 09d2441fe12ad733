// Whether the CUDA tests can run here. Every CUDA test skips (GTEST_SKIP, saying why) on a
// machine without a usable CUDA device, as CI's. With DLPERF_REQUIRE_GPU=1 (scripts/gpu-check.sh
// sets it) that is a failure instead: a driver too old for this build's CUDA runtime reports what
// a machine without any driver does (cudaErrorInsufficientDriver), and on the GPU machine every
// test skipping would otherwise read as a pass.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string_view>

namespace dlperf::cuda_test {

inline bool have_gpu() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  (void)cudaGetLastError();
  const bool ok = e == cudaSuccess && n > 0;
  const char* required = std::getenv("DLPERF_REQUIRE_GPU");
  if (!ok && required && std::string_view(required) == "1")
    ADD_FAILURE() << "DLPERF_REQUIRE_GPU=1, but no CUDA device is usable: "
                  << (e == cudaSuccess ? std::string_view("none found") : std::string_view(cudaGetErrorString(e)));
  return ok;
}

}  // namespace dlperf::cuda_test
