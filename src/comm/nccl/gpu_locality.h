// Which cores are close to each local rank's GPU, for pinning (core_pinning.h): the PCI
// address of every CUDA device (cudaDevAttrPci*), looked up in sysfs (topology.h). Local rank
// k uses device k % count: dlperf-comm's choice, and the CUDA backend's (device k, k < count).
#pragma once

#include <vector>

namespace dlperf {

// [local_size] the PUs close to each local rank's GPU; empty when there is no GPU or the
// locality of any of them cannot be known here (then pinning ignores locality).
std::vector<std::vector<int>> gpu_locality_by_local_rank(int local_size);

}  // namespace dlperf
