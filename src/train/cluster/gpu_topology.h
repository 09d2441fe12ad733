// The GPU/NIC topology a trace records (issue 13, item 6): how each GPU this process sees
// reaches the others and the node's network adapters over PCI, in the style of
// `nvidia-smi topo -m`, from hwloc's view of the machine (no driver tool needed):
//
//           GPU0  GPU1  mlx5_0  CPU affinity  NUMA
//   GPU0    X     PXB   PIX     0-27          0
//   GPU1    PXB   X     SYS     28-55         1
//   mlx5_0  PIX   SYS   X
//
//   X self; PIX one PCIe bridge between them; PXB several bridges, no host bridge; PHB a PCIe
//   host bridge; NODE host bridges within one NUMA node; SYS across NUMA nodes.
// PCI paths only: NVLink/NVSwitch links are not visible to hwloc and are not shown.
// NICs are the InfiniBand/RoCE adapters (hwloc "OpenFabrics" devices), or the PCI network
// interfaces when there are none. "" when no GPU is found in the topology.
#pragma once

#include <string>
#include <vector>

namespace dlperf {

// gpu_bus_ids: the PCI bus ids of the GPUs in CUDA device order ("0000:17:00.0").
std::string describe_gpu_topology(const std::vector<std::string>& gpu_bus_ids);
// The same over a topology exported by hwloc as XML (tests, other machines).
std::string describe_gpu_topology_xml(const std::vector<std::string>& gpu_bus_ids, const std::string& xml);

}  // namespace dlperf
