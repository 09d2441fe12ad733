// GPU locality from the CUDA runtime and sysfs; see gpu_locality.h.
#include "comm/nccl/gpu_locality.h"

#include <cuda_runtime.h>

#include "comm/topology.h"
#include "core/check_cuda.h"

namespace dlperf {

std::vector<std::vector<int>> gpu_locality_by_local_rank(int local_size) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    (void)cudaGetLastError();  // no device is not an error here: clear it
    return {};
  }
  std::vector<std::vector<int>> by_device;
  for (int d = 0; d < count; ++d) {
    int domain = 0, bus = 0, device = 0;
    DLPERF_CHECK(cudaDeviceGetAttribute(&domain, cudaDevAttrPciDomainId, d));
    DLPERF_CHECK(cudaDeviceGetAttribute(&bus, cudaDevAttrPciBusId, d));
    DLPERF_CHECK(cudaDeviceGetAttribute(&device, cudaDevAttrPciDeviceId, d));
    auto near = pci_local_pus({static_cast<unsigned>(domain), static_cast<unsigned>(bus), static_cast<unsigned>(device)});
    if (!near) return {};
    by_device.push_back(std::move(*near));
  }
  std::vector<std::vector<int>> out;
  for (int k = 0; k < local_size; ++k) out.push_back(by_device[static_cast<size_t>(k % count)]);
  return out;
}

}  // namespace dlperf
