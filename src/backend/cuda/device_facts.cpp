// The device facts a trace records (issue 13, item 6): the GPU's name and memory, its PCI bus
// id (for the topology), and the versions of the driver, CUDA runtime, cuDNN and cuBLAS.
// The driver's release ("550.54.15") comes from the kernel module's /proc file, which every
// Linux NVIDIA driver provides; the CUDA version it supports from cudaDriverGetVersion.
#include <cublas_v2.h>
#include <cudnn.h>
#include <library_types.h>

#include <fstream>
#include <regex>

#include "backend/cuda/ops.h"

namespace dlperf::cuda {
namespace {

std::string cuda_version(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

// "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024"
std::string driver_release() {
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  if (!std::getline(in, line)) return "";
  std::smatch m;
  if (std::regex_search(line, m, std::regex(R"(Kernel Module\s+([0-9][0-9.]*))"))) return m[1];
  return "";
}

}  // namespace

DeviceFacts describe_device(const Context& ctx) {
  DeviceFacts f;
  f.model = ctx.props.name;
  f.memory_bytes = static_cast<int64_t>(ctx.props.totalGlobalMem);
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, ctx.device) == cudaSuccess) f.pci_bus_id = bus;
  else cudaGetLastError();
  int runtime = 0, driver = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) f.versions["cuda"] = cuda_version(runtime);
  if (cudaDriverGetVersion(&driver) == cudaSuccess) {
    const std::string release = driver_release();
    f.versions["driver"] = (release.empty() ? std::string() : release + " ") + "(CUDA " + cuda_version(driver) + ")";
  }
  cudaGetLastError();
  const size_t cudnn = cudnnGetVersion();  // 9.1.0 -> 90100
  f.versions["cudnn"] = std::to_string(cudnn / 10000) + "." + std::to_string((cudnn % 10000) / 100) + "." + std::to_string(cudnn % 100);
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS && cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
    f.versions["cublas"] = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
  return f;
}

}  // namespace dlperf::cuda
